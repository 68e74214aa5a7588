//! The hint vocabulary: one table that every entry point parses hints through.
//!
//! Hints reach the device from a trace's hint column (`life=short;fdp=2`), from Python
//! (`Hint(write_life="short", placement_id=2)`), from a fio job's `write_hint` and from any
//! front end added later. They used to be parsed in each of those places with its own spellings
//! and messages, so a name that worked in one was refused by another. [`HINT_FIELDS`] now holds,
//! for each field of [`Hint`], its canonical name, the aliases kept from older spellings, its
//! named values and what a value may be; [`HintBuilder`] is the one parser, [`Hint`]'s `Display`
//! the one formatter, and [`HintError`] the one set of messages.
//!
//! Names: the canonical name of a field is the [`Hint`] struct field (`write_life`,
//! `placement_id`, ...); the aliases are the short trace-column names (`life`, `fdp`, `sea`,
//! `group`, `rel`, `flushread`). Values are matched ignoring ASCII case, so the standards'
//! spellings work too (Linux `NOT_SET` ... `EXTREME`, also as their numbers 0-5, see
//! `shared/spec/formats.md`). The formatter writes canonical names and values only, so
//! `format → parse` is the identity.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::request::{Hint, Reliability, SeaClass, WriteLife};

/// One field of [`Hint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HintField {
    WriteLife,
    Stream,
    PlacementId,
    SeaClass,
    ReadGroup,
    Reliability,
    FlushRead,
}

/// What the vocabulary says about one hint field.
#[derive(Debug)]
pub struct HintFieldSpec {
    pub field: HintField,
    /// The canonical name: the [`Hint`] field, Python's keyword, what the formatter writes.
    pub name: &'static str,
    /// Other names accepted everywhere, kept so that older traces and scripts still work.
    pub aliases: &'static [&'static str],
    /// The named values in canonical spelling; empty for numbers and flags.
    pub values: &'static [&'static str],
    /// What a value may be, as error messages and the docs say it.
    pub expected: &'static str,
    /// What the hint means, in one line.
    pub doc: &'static str,
}

/// Every hint field, in [`HintField`] order (the index is the discriminant).
pub const HINT_FIELDS: [HintFieldSpec; 7] = [
    HintFieldSpec {
        field: HintField::WriteLife,
        name: "write_life",
        aliases: &["life"],
        values: &["not_set", "none", "short", "medium", "long", "extreme"],
        expected: "one of not_set, none, short, medium, long, extreme (or 0-5)",
        doc: "Linux F_SET_RW_HINT write-life hint (relative lifetime of the data)",
    },
    HintFieldSpec {
        field: HintField::Stream,
        name: "stream",
        aliases: &[],
        values: &[],
        expected: "an integer 0-65535",
        doc: "NVMe Streams directive: stream id of a write",
    },
    HintFieldSpec {
        field: HintField::PlacementId,
        name: "placement_id",
        aliases: &["fdp"],
        values: &[],
        expected: "an integer 0-65535",
        doc: "NVMe FDP placement identifier of a write (writes without one go to handle 0)",
    },
    HintFieldSpec {
        field: HintField::SeaClass,
        name: "sea_class",
        aliases: &["sea"],
        values: &["dyn", "stat"],
        expected: "one of dyn, stat",
        doc: "SEA-SSD class of a write: dyn (short-lived) or stat (long-lived)",
    },
    HintFieldSpec {
        field: HintField::ReadGroup,
        name: "read_group",
        aliases: &["group"],
        values: &[],
        expected: "an integer 0-18446744073709551615",
        doc: "melded pages: writes of one group will be read together",
    },
    HintFieldSpec {
        field: HintField::Reliability,
        name: "reliability",
        aliases: &["rel"],
        values: &["dirty", "clean"],
        expected: "one of dirty, clean",
        doc: "FlexECC: dirty (only copy, ECC) or clean (copy elsewhere, EDC suffices)",
    },
    HintFieldSpec {
        field: HintField::FlushRead,
        name: "flush_read",
        aliases: &["flushread"],
        values: &[],
        expected: "no value, true or false",
        doc: "FlexECC: this read writes dirty data back to its backing store",
    },
];

/// A value as an entry point received it, before the field's parser sees it. Typed front ends
/// (Python) pass numbers and booleans as such, text front ends (traces) pass text; each field
/// accepts the forms that make sense for it, so `fdp=3` and `placement_id=3` mean the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HintValue<'a> {
    /// An item without a value (`flushread` in a trace's hint column).
    Bare,
    Text(&'a str),
    /// Wide enough that a negative or oversized Python integer reaches the field's parser and
    /// gets the field's message rather than a conversion error.
    Int(i128),
    Bool(bool),
}

impl fmt::Display for HintValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HintValue::Bare => f.write_str("no value"),
            HintValue::Text(s) => write!(f, "'{s}'"),
            HintValue::Int(n) => write!(f, "{n}"),
            HintValue::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A hint field's value as the formatter and typed front ends give it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HintOut {
    Name(&'static str),
    Int(u64),
    /// A set flag (`flush_read`); an unset flag is not given back at all.
    Flag,
}

/// Why a hint was refused; the same message whichever entry point it came through.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HintError {
    #[error("unknown hint '{key}' (known: {})", known_names())]
    Unknown { key: String },
    #[error("hint '{field}' expects {expected}, found {found}")]
    BadValue {
        field: &'static str,
        expected: &'static str,
        found: String,
    },
    #[error("hint '{field}' given twice")]
    Twice { field: &'static str },
}

/// `write_life (life), stream, ...`: every name, for the unknown-hint message.
fn known_names() -> String {
    HINT_FIELDS
        .iter()
        .map(|spec| match spec.aliases {
            [] => spec.name.to_string(),
            aliases => format!("{} ({})", spec.name, aliases.join(", ")),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl WriteLife {
    /// Every value, in the order of the Linux constants (the discriminant is the number).
    pub const ALL: [WriteLife; 6] = [
        WriteLife::NotSet,
        WriteLife::None,
        WriteLife::Short,
        WriteLife::Medium,
        WriteLife::Long,
        WriteLife::Extreme,
    ];

    /// The canonical spelling (Linux's constant names in lower case).
    pub fn name(self) -> &'static str {
        match self {
            WriteLife::NotSet => "not_set",
            WriteLife::None => "none",
            WriteLife::Short => "short",
            WriteLife::Medium => "medium",
            WriteLife::Long => "long",
            WriteLife::Extreme => "extreme",
        }
    }
}

impl SeaClass {
    pub const ALL: [SeaClass; 2] = [SeaClass::Dyn, SeaClass::Stat];

    pub fn name(self) -> &'static str {
        match self {
            SeaClass::Dyn => "dyn",
            SeaClass::Stat => "stat",
        }
    }
}

impl Reliability {
    pub const ALL: [Reliability; 2] = [Reliability::Dirty, Reliability::Clean];

    pub fn name(self) -> &'static str {
        match self {
            Reliability::Dirty => "dirty",
            Reliability::Clean => "clean",
        }
    }
}

/// The value of `all` whose name is `text`, ignoring ASCII case.
fn by_name<T: Copy>(all: &[T], name: fn(T) -> &'static str, text: &str) -> Option<T> {
    let text = text.trim();
    all.iter()
        .copied()
        .find(|&v| name(v).eq_ignore_ascii_case(text))
}

fn write_life(value: HintValue<'_>) -> Option<WriteLife> {
    match value {
        HintValue::Text(text) => by_name(&WriteLife::ALL, WriteLife::name, text)
            // `notset` is the trace column's older spelling.
            .or_else(|| {
                text.trim()
                    .eq_ignore_ascii_case("notset")
                    .then_some(WriteLife::NotSet)
            })
            .or_else(|| WriteLife::from_index(text.trim().parse().ok()?)),
        HintValue::Int(n) => WriteLife::from_index(u8::try_from(n).ok()?),
        HintValue::Bare | HintValue::Bool(_) => None,
    }
}

fn integer<T: TryFrom<i128> + FromStr>(value: HintValue<'_>) -> Option<T> {
    match value {
        // `str::parse` accepts a leading `+`; an id is digits only.
        HintValue::Text(text) => {
            let text = text.trim();
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            text.parse().ok()
        }
        HintValue::Int(n) => T::try_from(n).ok(),
        HintValue::Bare | HintValue::Bool(_) => None,
    }
}

fn flag(value: HintValue<'_>) -> Option<bool> {
    match value {
        HintValue::Bare => Some(true),
        HintValue::Bool(b) => Some(b),
        HintValue::Text(text) => match text.trim() {
            t if t.eq_ignore_ascii_case("true") => Some(true),
            t if t.eq_ignore_ascii_case("false") => Some(false),
            _ => None,
        },
        // 1 for true is how a typo of another field's value looks; refuse it.
        HintValue::Int(_) => None,
    }
}

impl HintField {
    pub fn spec(self) -> &'static HintFieldSpec {
        &HINT_FIELDS[self as usize]
    }

    /// The field named `key`, by its canonical name or an alias (exact spelling).
    pub fn lookup(key: &str) -> Option<HintField> {
        HINT_FIELDS
            .iter()
            .find(|spec| spec.name == key || spec.aliases.contains(&key))
            .map(|spec| spec.field)
    }

    /// Parse `value` and store it in `hint`.
    pub fn set(self, hint: &mut Hint, value: HintValue<'_>) -> Result<(), HintError> {
        let bad = || {
            let spec = self.spec();
            HintError::BadValue {
                field: spec.name,
                expected: spec.expected,
                found: value.to_string(),
            }
        };
        match self {
            HintField::WriteLife => hint.write_life = Some(write_life(value).ok_or_else(bad)?),
            HintField::Stream => hint.stream = Some(integer(value).ok_or_else(bad)?),
            HintField::PlacementId => hint.placement_id = Some(integer(value).ok_or_else(bad)?),
            HintField::SeaClass => {
                let text = match value {
                    HintValue::Text(text) => text,
                    _ => return Err(bad()),
                };
                hint.sea_class =
                    Some(by_name(&SeaClass::ALL, SeaClass::name, text).ok_or_else(bad)?);
            }
            HintField::ReadGroup => hint.read_group = Some(integer(value).ok_or_else(bad)?),
            HintField::Reliability => {
                let text = match value {
                    HintValue::Text(text) => text,
                    _ => return Err(bad()),
                };
                hint.reliability =
                    Some(by_name(&Reliability::ALL, Reliability::name, text).ok_or_else(bad)?);
            }
            HintField::FlushRead => hint.flush_read = flag(value).ok_or_else(bad)?,
        }
        Ok(())
    }

    /// The field's value in `hint`, or `None` when it is not set.
    pub fn get(self, hint: &Hint) -> Option<HintOut> {
        match self {
            HintField::WriteLife => hint.write_life.map(|v| HintOut::Name(v.name())),
            HintField::Stream => hint.stream.map(|v| HintOut::Int(v.into())),
            HintField::PlacementId => hint.placement_id.map(|v| HintOut::Int(v.into())),
            HintField::SeaClass => hint.sea_class.map(|v| HintOut::Name(v.name())),
            HintField::ReadGroup => hint.read_group.map(HintOut::Int),
            HintField::Reliability => hint.reliability.map(|v| HintOut::Name(v.name())),
            HintField::FlushRead => hint.flush_read.then_some(HintOut::Flag),
        }
    }
}

/// Builds a [`Hint`] from (name, value) items, the way every entry point does.
#[derive(Debug, Clone, Copy, Default)]
pub struct HintBuilder {
    hint: Hint,
    /// Fields already given, one bit per [`HintField`]: `life=short;write_life=long` is a
    /// contradiction, not an override.
    seen: u8,
}

impl HintBuilder {
    pub fn new() -> Self {
        HintBuilder::default()
    }

    /// Parse one item: `key` is a canonical name or an alias.
    pub fn set(&mut self, key: &str, value: HintValue<'_>) -> Result<&mut Self, HintError> {
        let field = HintField::lookup(key).ok_or_else(|| HintError::Unknown {
            key: key.to_string(),
        })?;
        let bit = 1u8 << field as u8;
        if self.seen & bit != 0 {
            return Err(HintError::Twice {
                field: field.spec().name,
            });
        }
        field.set(&mut self.hint, value)?;
        self.seen |= bit;
        Ok(self)
    }

    pub fn finish(self) -> Hint {
        self.hint
    }
}

impl Hint {
    /// The set fields with their canonical names and values, in [`HINT_FIELDS`] order.
    pub fn items(&self) -> impl Iterator<Item = (&'static str, HintOut)> + '_ {
        HINT_FIELDS
            .iter()
            .filter_map(|spec| spec.field.get(self).map(|v| (spec.name, v)))
    }
}

/// The text form: items separated by `;`, each `name=value` or a bare flag name; spaces around
/// items, names and values are ignored. The empty string is the empty hint.
impl FromStr for Hint {
    type Err = HintError;

    fn from_str(text: &str) -> Result<Hint, HintError> {
        let mut builder = HintBuilder::new();
        for item in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                Some((key, value)) => builder.set(key.trim(), HintValue::Text(value.trim()))?,
                None => builder.set(item, HintValue::Bare)?,
            };
        }
        Ok(builder.finish())
    }
}

/// Canonical names and values, `;`-separated; a set flag is written bare (`flush_read`).
impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, value)) in self.items().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            match value {
                HintOut::Name(v) => write!(f, "{name}={v}")?,
                HintOut::Int(v) => write!(f, "{name}={v}")?,
                HintOut::Flag => f.write_str(name)?,
            }
        }
        Ok(())
    }
}

/// Parse a write-life value alone (fio's `write_hint`), with the vocabulary's message.
pub fn parse_write_life(text: &str) -> Result<WriteLife, HintError> {
    let mut hint = Hint::default();
    HintField::WriteLife.set(&mut hint, HintValue::Text(text))?;
    Ok(hint.write_life.expect("set stores a value or fails"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_field_order_and_names_are_unique() {
        let mut names = Vec::new();
        for (i, spec) in HINT_FIELDS.iter().enumerate() {
            assert_eq!(spec.field as usize, i, "{}", spec.name);
            names.push(spec.name);
            names.extend(spec.aliases);
        }
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a name or alias is used twice");
    }

    #[test]
    fn value_names_match_the_table_and_serde() {
        let serde_name = |v: serde_json::Value| v.as_str().unwrap().to_string();
        let life: Vec<_> = WriteLife::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(life, HintField::WriteLife.spec().values);
        for v in WriteLife::ALL {
            assert_eq!(WriteLife::from_index(v as u8), Some(v));
            assert_eq!(serde_name(serde_json::to_value(v).unwrap()), v.name());
        }
        let sea: Vec<_> = SeaClass::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(sea, HintField::SeaClass.spec().values);
        for v in SeaClass::ALL {
            assert_eq!(serde_name(serde_json::to_value(v).unwrap()), v.name());
        }
        let rel: Vec<_> = Reliability::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(rel, HintField::Reliability.spec().values);
        for v in Reliability::ALL {
            assert_eq!(serde_name(serde_json::to_value(v).unwrap()), v.name());
        }
    }

    fn parse(text: &str) -> Result<Hint, String> {
        text.parse::<Hint>().map_err(|e| e.to_string())
    }

    #[test]
    fn every_alias_and_spelling_gives_the_same_hint() {
        let cases: &[(&[&str], Hint)] = &[
            (
                &[
                    "write_life=not_set",
                    "life=notset",
                    "life=not_set",
                    "write_life=NOT_SET",
                    "life=0",
                ],
                Hint {
                    write_life: Some(WriteLife::NotSet),
                    ..Hint::default()
                },
            ),
            (
                &["life=extreme", "write_life=EXTREME", "write_life=5"],
                Hint {
                    write_life: Some(WriteLife::Extreme),
                    ..Hint::default()
                },
            ),
            (
                &["fdp=7", "placement_id=7", " placement_id = 7 "],
                Hint {
                    placement_id: Some(7),
                    ..Hint::default()
                },
            ),
            (
                &["sea=dyn", "sea_class=dyn", "sea_class=DYN"],
                Hint {
                    sea_class: Some(SeaClass::Dyn),
                    ..Hint::default()
                },
            ),
            (
                &[
                    "group=18446744073709551615",
                    "read_group=18446744073709551615",
                ],
                Hint {
                    read_group: Some(u64::MAX),
                    ..Hint::default()
                },
            ),
            (
                &["rel=clean", "reliability=clean"],
                Hint {
                    reliability: Some(Reliability::Clean),
                    ..Hint::default()
                },
            ),
            (
                &[
                    "flushread",
                    "flush_read",
                    "flush_read=true",
                    "flushread=TRUE",
                ],
                Hint {
                    flush_read: true,
                    ..Hint::default()
                },
            ),
        ];
        for (spellings, want) in cases {
            for text in *spellings {
                assert_eq!(parse(text).as_ref(), Ok(want), "{text}");
            }
        }
    }

    #[test]
    fn typed_values_parse_like_text() {
        let mut b = HintBuilder::new();
        b.set("write_life", HintValue::Int(2)).unwrap();
        b.set("fdp", HintValue::Int(65535)).unwrap();
        b.set("flush_read", HintValue::Bool(true)).unwrap();
        assert_eq!(
            b.finish(),
            parse("life=short;placement_id=65535;flushread").unwrap()
        );
    }

    #[test]
    fn errors_name_the_canonical_field_and_what_it_expects() {
        assert_eq!(
            parse("life=forever").unwrap_err(),
            "hint 'write_life' expects one of not_set, none, short, medium, long, extreme \
             (or 0-5), found 'forever'"
        );
        // Same input through another alias, same message.
        assert_eq!(parse("write_life=forever"), parse("life=forever"));
        assert_eq!(
            parse("fdp=65536").unwrap_err(),
            "hint 'placement_id' expects an integer 0-65535, found '65536'"
        );
        assert_eq!(
            parse("stream").unwrap_err(),
            "hint 'stream' expects an integer 0-65535, found no value"
        );
        assert_eq!(
            parse("stream=+3").unwrap_err(),
            "hint 'stream' expects an integer 0-65535, found '+3'"
        );
        assert_eq!(
            parse("fdp=1;placement_id=2").unwrap_err(),
            "hint 'placement_id' given twice"
        );
        assert_eq!(
            parse("bogus=1").unwrap_err(),
            "unknown hint 'bogus' (known: write_life (life), stream, placement_id (fdp), \
             sea_class (sea), read_group (group), reliability (rel), flush_read (flushread))"
        );
        let mut b = HintBuilder::new();
        let e = b.set("stream", HintValue::Int(-1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hint 'stream' expects an integer 0-65535, found -1"
        );
        let e = b.set("flush_read", HintValue::Int(1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hint 'flush_read' expects no value, true or false, found 1"
        );
        let e = b.set("sea", HintValue::Bool(true)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hint 'sea_class' expects one of dyn, stat, found true"
        );
    }

    #[test]
    fn format_writes_canonical_names_and_round_trips() {
        let hint = Hint {
            write_life: Some(WriteLife::NotSet),
            stream: Some(9),
            placement_id: Some(4),
            sea_class: Some(SeaClass::Stat),
            read_group: Some(u64::MAX),
            reliability: Some(Reliability::Dirty),
            flush_read: true,
        };
        let text = hint.to_string();
        assert_eq!(
            text,
            "write_life=not_set;stream=9;placement_id=4;sea_class=stat;\
             read_group=18446744073709551615;reliability=dirty;flush_read"
        );
        assert_eq!(text.parse::<Hint>(), Ok(hint));
        assert_eq!(Hint::default().to_string(), "");
        assert_eq!("".parse::<Hint>(), Ok(Hint::default()));
    }

    #[test]
    fn fio_write_hint_uses_the_same_values() {
        assert_eq!(parse_write_life("Short"), Ok(WriteLife::Short));
        assert!(parse_write_life("x")
            .unwrap_err()
            .to_string()
            .starts_with("hint 'write_life' expects"));
    }
}
