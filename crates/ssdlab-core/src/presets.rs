//! Built-in device presets: the TOML files of `presets/`, embedded at build time so that the
//! library, the CLI and the Python package share one copy.

use crate::config::ConfigError;

const PRESETS: &[(&str, &str)] = &[
    ("flexecc", include_str!("../../../presets/flexecc.toml")),
    (
        "melded-16x4",
        include_str!("../../../presets/melded-16x4.toml"),
    ),
    (
        "melded-8x8",
        include_str!("../../../presets/melded-8x8.toml"),
    ),
    ("mlc", include_str!("../../../presets/mlc.toml")),
    ("noftl", include_str!("../../../presets/noftl.toml")),
    ("qlc", include_str!("../../../presets/qlc.toml")),
    ("seassd", include_str!("../../../presets/seassd.toml")),
    ("slc", include_str!("../../../presets/slc.toml")),
    ("tlc", include_str!("../../../presets/tlc.toml")),
];

/// (name, one-line description) of every preset, sorted by name.
pub fn list() -> Vec<(&'static str, String)> {
    PRESETS
        .iter()
        .map(|(name, text)| {
            let description = text
                .parse::<toml::Table>()
                .ok()
                .and_then(|t| {
                    t.get("description")
                        .and_then(|d| d.as_str().map(str::to_string))
                })
                .unwrap_or_default();
            (*name, description)
        })
        .collect()
}

/// The TOML text of a preset.
pub fn get(name: &str) -> Result<&'static str, ConfigError> {
    PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
        .ok_or_else(|| ConfigError::UnknownPreset {
            name: name.to_string(),
            known: PRESETS
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn every_preset_validates_and_has_a_description() {
        for (name, description) in list() {
            let text = get(name).unwrap();
            let cfg = Config::from_toml(text, name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(cfg.name, name);
            assert!(!description.is_empty(), "{name}");
        }
        assert!(matches!(
            get("nope"),
            Err(ConfigError::UnknownPreset { .. })
        ));
    }
}
