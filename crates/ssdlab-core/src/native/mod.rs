//! The native flash interface (NoFTL: Hardock, Petrov, Gottstein, Buchmann, "NoFTL: database
//! systems on FTL-less flash storage", VLDB 2013): the flash without an FTL, as a host-side
//! storage manager sees it. Read a page, program a page with its out-of-band (OOB) area, read
//! the OOB alone, erase a block; the geometry is visible and NAND's rules are enforced.
//!
//! This module is the NAND state and its rules, untimed: per block the next programmable page
//! (pages of a block are programmed in order, once per erase), the erase count and the bad-block
//! flag, and the stored data and OOB. `host::native` times the operations on the device's own
//! dies and channels (the timeline the block interface uses), so there is one timing model.
//!
//! Addresses are flat. A block number `b` lies on native die `n = b % dies`, and native dies
//! go round the channels first (`channel = n % channels`, die within the channel
//! `n / channels`); the blocks of one die alternate over its planes (`j = b / dies`, plane
//! `j % planes_per_die`, block in plane `j / planes_per_die`). So consecutive block numbers
//! lie on different channels, then different dies, and a host that stripes by block number
//! gets the device's parallelism. Page `p` is page `p % pages_per_block` of block
//! `p / pages_per_block`.
//!
//! An erased page reads as all ones (0xFF), data and OOB, as NAND does; OOB bytes a program
//! leaves out stay 0xFF.

use crate::config::Config;
use thiserror::Error;

/// A native call the flash refuses. `OutOfRange` and `BufferSize` are bad arguments; the
/// others break a NAND rule ([`NandError::is_rule`]).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum NandError {
    #[error("{arg}: {what} {value} is out of range (the device has {count}: 0 .. {last})", last = count - 1)]
    OutOfRange {
        arg: &'static str,
        what: &'static str,
        value: u64,
        count: u64,
    },
    #[error("{arg}: expected {expected}, got {len} bytes")]
    BufferSize {
        arg: &'static str,
        expected: String,
        len: usize,
    },
    #[error(
        "program of page {page} (block {block}, page {index} of the block): the page is not \
         erased (block {block} is programmed up to page {next} of the block; erase the block \
         first)"
    )]
    NotErased {
        page: u64,
        block: u32,
        index: u32,
        next: u32,
    },
    #[error(
        "program of page {page} (block {block}, page {index} of the block): out of order, the \
         pages of a block are programmed in order and block {block}'s next page is page {next} \
         of the block (page {next_page})"
    )]
    OutOfOrder {
        page: u64,
        block: u32,
        index: u32,
        next: u32,
        next_page: u64,
    },
    #[error(
        "erase of block {block}: the block has reached its endurance of {endurance} \
         program/erase cycles (cell.endurance_cycles) and is now bad"
    )]
    WornOut { block: u32, endurance: u32 },
    #[error("{op} of block {block}: the block is bad (worn out)")]
    BadBlock { op: &'static str, block: u32 },
}

impl NandError {
    /// Is this a violation of a NAND rule (rather than a bad argument)?
    pub fn is_rule(&self) -> bool {
        !matches!(
            self,
            NandError::OutOfRange { .. } | NandError::BufferSize { .. }
        )
    }
}

/// The geometry a native host sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeGeometry {
    pub channels: u32,
    pub dies_per_channel: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_bytes: u32,
    pub oob_bytes: u32,
    /// Program/erase cycles a block survives.
    pub endurance: u32,
    pub dies: u32,
    pub total_blocks: u32,
    pub total_pages: u64,
}

/// Where a native block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLocation {
    pub channel: u32,
    /// Die within its channel.
    pub die: u32,
    /// Plane within its die.
    pub plane: u32,
    pub block_in_plane: u32,
    /// The device's own die index (channel-major), for the timeline.
    pub device_die: u32,
}

/// Counts of native operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NativeCounters {
    pub reads: u64,
    pub programs: u64,
    pub erases: u64,
    pub oob_reads: u64,
    /// Calls refused for breaking a NAND rule.
    pub rule_violations: u64,
    /// Erases refused because the block wore out (the block became bad).
    pub worn_out_blocks: u64,
}

/// NAND state behind the native interface: write pointers, wear, bad blocks, data and OOB.
#[derive(Debug)]
pub struct NativeFlashState {
    geo: NativeGeometry,
    /// Device die of each native die `b % dies`.
    device_die: Vec<u32>,
    /// Per block: index of the next programmable page (pages below it are programmed).
    next_page: Vec<u32>,
    erase_counts: Vec<u32>,
    bad: Vec<bool>,
    /// Page data; None without a store.
    data: Option<PageStore>,
    /// Per block, its pages' OOB areas (always kept: recovery reads them).
    oob: Vec<Option<Box<[u8]>>>,
    /// What an erased page's OOB reads as: all ones.
    erased_oob: Box<[u8]>,
    pub counters: NativeCounters,
}

/// The data of programmed pages: one buffer per page, so that a program can adopt the
/// caller's buffer and a read can lend the stored one (no copy either way). The buffers of
/// erased pages are recycled for later programs, and buffers held (stored plus spare) never
/// exceed the flash's page count: the memory is the data and one pointer per page.
#[derive(Debug)]
struct PageStore {
    page_bytes: usize,
    total_pages: usize,
    /// Per page, its data while it is programmed.
    pages: Vec<Option<Box<[u8]>>>,
    /// Pages holding data.
    stored: usize,
    /// Buffers of erased pages, for the next programs.
    spare: Vec<Box<[u8]>>,
    /// What an erased page reads as: all ones.
    erased: Box<[u8]>,
}

impl PageStore {
    fn new(total_pages: u64, page_bytes: usize) -> PageStore {
        PageStore {
            page_bytes,
            total_pages: total_pages as usize,
            pages: (0..total_pages).map(|_| None).collect(),
            stored: 0,
            spare: Vec::new(),
            erased: vec![0xFF; page_bytes].into_boxed_slice(),
        }
    }

    #[inline]
    fn take_buffer(&mut self) -> Box<[u8]> {
        self.spare
            .pop()
            // Zeroed memory comes from the allocator untouched: no page is written here.
            .unwrap_or_else(|| vec![0; self.page_bytes].into_boxed_slice())
    }

    #[inline]
    fn recycle(&mut self, buffer: Box<[u8]>) {
        if self.stored + self.spare.len() < self.total_pages {
            self.spare.push(buffer);
        }
    }

    /// Store `buffer` as page `page`'s data (the page is erased, so its slot is empty).
    #[inline]
    fn keep(&mut self, page: u64, buffer: Box<[u8]>) {
        debug_assert_eq!(buffer.len(), self.page_bytes);
        let slot = &mut self.pages[page as usize];
        debug_assert!(slot.is_none());
        *slot = Some(buffer);
        self.stored += 1;
        // A buffer brought from outside may push the total over the page count: drop a spare.
        if self.stored + self.spare.len() > self.total_pages {
            self.spare.pop();
        }
    }
}

/// Program/erase cycles by cell type when `cell.endurance_cycles` is unset (typical datasheet
/// figures: SLC 100k, MLC 10k, TLC 3k, QLC 1k).
pub fn default_endurance(config: &Config) -> u32 {
    config
        .cell
        .endurance_cycles
        .unwrap_or(match config.cell.kind {
            crate::config::CellKind::Slc => 100_000,
            crate::config::CellKind::Mlc => 10_000,
            crate::config::CellKind::Tlc => 3_000,
            crate::config::CellKind::Qlc => 1_000,
        })
}

impl NativeFlashState {
    /// A flash whose blocks are all erased, with no wear.
    pub fn new(config: &Config, store_data: bool) -> NativeFlashState {
        let g = &config.geometry;
        let dies_per_channel = g.chips_per_channel * g.dies_per_chip;
        let dies = g.channels * dies_per_channel;
        let total_blocks = dies * g.planes_per_die * g.blocks_per_plane;
        let geo = NativeGeometry {
            channels: g.channels,
            dies_per_channel,
            planes_per_die: g.planes_per_die,
            blocks_per_plane: g.blocks_per_plane,
            pages_per_block: g.pages_per_block,
            page_bytes: g.page_size_bytes,
            oob_bytes: g.oob_size_bytes,
            endurance: default_endurance(config),
            dies,
            total_blocks,
            total_pages: total_blocks as u64 * g.pages_per_block as u64,
        };
        let device_die = (0..dies)
            .map(|n| (n % g.channels) * dies_per_channel + n / g.channels)
            .collect();
        let blocks = total_blocks as usize;
        NativeFlashState {
            device_die,
            next_page: vec![0; blocks],
            erase_counts: vec![0; blocks],
            bad: vec![false; blocks],
            data: store_data.then(|| PageStore::new(geo.total_pages, geo.page_bytes as usize)),
            oob: (0..blocks).map(|_| None).collect(),
            erased_oob: vec![0xFF; geo.oob_bytes as usize].into_boxed_slice(),
            counters: NativeCounters::default(),
            geo,
        }
    }

    pub fn geometry(&self) -> &NativeGeometry {
        &self.geo
    }

    pub fn stores_data(&self) -> bool {
        self.data.is_some()
    }

    /// Where block `block` is.
    pub fn locate(&self, block: u32) -> Result<BlockLocation, NandError> {
        self.check_block("block", block)?;
        let g = &self.geo;
        let n = block % g.dies;
        let j = block / g.dies;
        Ok(BlockLocation {
            channel: n % g.channels,
            die: n / g.channels,
            plane: j % g.planes_per_die,
            block_in_plane: j / g.planes_per_die,
            device_die: self.device_die[n as usize],
        })
    }

    /// The device die of a block known to be in range (the timing hot path).
    #[inline]
    pub fn device_die_of(&self, block: u32) -> u32 {
        self.device_die[(block % self.geo.dies) as usize]
    }

    #[inline]
    pub fn check_block(&self, arg: &'static str, block: u32) -> Result<(), NandError> {
        if block >= self.geo.total_blocks {
            return Err(NandError::OutOfRange {
                arg,
                what: "block",
                value: block as u64,
                count: self.geo.total_blocks as u64,
            });
        }
        Ok(())
    }

    /// (block, page index in the block) of page `page`, checked.
    #[inline]
    pub fn split_page(&self, page: u64) -> Result<(u32, u32), NandError> {
        if page >= self.geo.total_pages {
            return Err(NandError::OutOfRange {
                arg: "page",
                what: "page",
                value: page,
                count: self.geo.total_pages,
            });
        }
        let ppb = self.geo.pages_per_block as u64;
        Ok(((page / ppb) as u32, (page % ppb) as u32))
    }

    pub fn erase_count(&self, block: u32) -> Result<u32, NandError> {
        self.check_block("block", block)?;
        Ok(self.erase_counts[block as usize])
    }

    pub fn erase_counts(&self) -> &[u32] {
        &self.erase_counts
    }

    pub fn is_bad(&self, block: u32) -> bool {
        self.bad[block as usize]
    }

    /// Bad blocks, ascending.
    pub fn bad_blocks(&self) -> Vec<u32> {
        (0..self.geo.total_blocks)
            .filter(|&b| self.bad[b as usize])
            .collect()
    }

    /// Is page `page` erased (programmable once the pages before it in its block are)?
    pub fn is_erased(&self, page: u64) -> Result<bool, NandError> {
        let (block, index) = self.split_page(page)?;
        Ok(index >= self.next_page[block as usize])
    }

    /// Index in `block` of its next programmable page (`pages_per_block` when it is full).
    pub fn next_page(&self, block: u32) -> Result<u32, NandError> {
        self.check_block("block", block)?;
        Ok(self.next_page[block as usize])
    }

    /// Check a program of `page` with `data_len` bytes of data and `oob_len` of OOB; returns
    /// (block, index in block).
    #[inline]
    pub fn check_program(
        &self,
        page: u64,
        data_len: usize,
        oob_len: usize,
    ) -> Result<(u32, u32), NandError> {
        let (block, index) = self.split_page(page)?;
        if data_len != self.geo.page_bytes as usize {
            return Err(NandError::BufferSize {
                arg: "data",
                expected: format!("exactly the page size, {} bytes", self.geo.page_bytes),
                len: data_len,
            });
        }
        if oob_len > self.geo.oob_bytes as usize {
            return Err(NandError::BufferSize {
                arg: "oob",
                expected: format!("at most the OOB size, {} bytes", self.geo.oob_bytes),
                len: oob_len,
            });
        }
        let b = block as usize;
        if self.bad[b] {
            return Err(NandError::BadBlock {
                op: "program",
                block,
            });
        }
        let next = self.next_page[b];
        if index < next {
            return Err(NandError::NotErased {
                page,
                block,
                index,
                next,
            });
        }
        if index > next {
            return Err(NandError::OutOfOrder {
                page,
                block,
                index,
                next,
                next_page: self.geo.pages_per_block as u64 * block as u64 + next as u64,
            });
        }
        Ok((block, index))
    }

    /// Apply a program checked by [`NativeFlashState::check_program`]: the data is copied
    /// once, into a recycled page buffer.
    #[inline]
    pub fn apply_program(&mut self, block: u32, index: u32, data: &[u8], oob: &[u8]) {
        if let Some(store) = &mut self.data {
            let mut buffer = store.take_buffer();
            buffer.copy_from_slice(data);
            store.keep(
                self.geo.pages_per_block as u64 * block as u64 + index as u64,
                buffer,
            );
        }
        self.apply_program_oob(block, index, oob);
    }

    /// Apply a program checked by [`NativeFlashState::check_program`] whose data buffer
    /// becomes the page's storage: no copy. Without a data store the buffer is dropped.
    #[inline]
    pub fn apply_program_owned(&mut self, block: u32, index: u32, data: Box<[u8]>, oob: &[u8]) {
        if let Some(store) = &mut self.data {
            store.keep(
                self.geo.pages_per_block as u64 * block as u64 + index as u64,
                data,
            );
        }
        self.apply_program_oob(block, index, oob);
    }

    /// The write pointer, the counter and the OOB of a program.
    #[inline]
    fn apply_program_oob(&mut self, block: u32, index: u32, oob: &[u8]) {
        let b = block as usize;
        let ppb = self.geo.pages_per_block as usize;
        debug_assert_eq!(self.next_page[b], index);
        self.next_page[b] = index + 1;
        self.counters.programs += 1;
        let size = self.geo.oob_bytes as usize;
        if size > 0 {
            // The OOB of an erased page is all ones already (see `apply_erase`): only the
            // bytes given are written, so a short OOB touches one cache line, not the area.
            let arena =
                self.oob[b].get_or_insert_with(|| vec![0xFF; size * ppb].into_boxed_slice());
            let at = index as usize * size;
            arena[at..at + oob.len()].copy_from_slice(oob);
        }
    }

    /// A page-sized buffer to fill and program with [`NativeFlashState::apply_program_owned`]:
    /// one an erase freed when there is one (its contents are stale), else a new zeroed one.
    /// None without a data store.
    #[inline]
    pub fn take_buffer(&mut self) -> Option<Box<[u8]>> {
        self.data.as_mut().map(PageStore::take_buffer)
    }

    /// Give back a page buffer that was not programmed (kept for later programs).
    pub fn give_back_buffer(&mut self, buffer: Box<[u8]>) {
        if let Some(store) = &mut self.data {
            if buffer.len() == store.page_bytes {
                store.recycle(buffer);
            }
        }
    }

    /// Page `(block, index)`'s data, borrowed from the store (all 0xFF when erased); None
    /// without a data store.
    #[inline]
    pub fn page_data(&self, block: u32, index: u32) -> Option<&[u8]> {
        let store = self.data.as_ref()?;
        if index >= self.next_page[block as usize] {
            return Some(&store.erased);
        }
        let page = self.geo.pages_per_block as u64 * block as u64 + index as u64;
        Some(
            store.pages[page as usize]
                .as_deref()
                .expect("a programmed page has its data"),
        )
    }

    /// Page `(block, index)`'s OOB, borrowed (`oob_bytes` long; all 0xFF when erased).
    #[inline]
    pub fn page_oob(&self, block: u32, index: u32) -> &[u8] {
        let size = self.geo.oob_bytes as usize;
        if size == 0 || index >= self.next_page[block as usize] {
            return &self.erased_oob;
        }
        let arena = self.oob[block as usize]
            .as_ref()
            .expect("a programmed page has its block's OOB arena");
        let at = index as usize * size;
        &arena[at..at + size]
    }

    /// Copy page `(block, index)`'s data into `out` (0xFF when erased). Without a data store
    /// `out` is left as it is.
    #[inline]
    pub fn copy_data(&self, block: u32, index: u32, out: &mut [u8]) {
        if let Some(data) = self.page_data(block, index) {
            out.copy_from_slice(data);
        }
    }

    /// Copy page `(block, index)`'s OOB into `out` (`oob_bytes` long; 0xFF when erased).
    #[inline]
    pub fn copy_oob(&self, block: u32, index: u32, out: &mut [u8]) {
        out.copy_from_slice(self.page_oob(block, index));
    }

    /// Check an erase of `block`. An erase of a block at its endurance limit fails and the
    /// block becomes bad (the state change is made here: the error is the outcome).
    pub fn check_erase(&mut self, block: u32) -> Result<(), NandError> {
        self.check_block("block", block)?;
        let b = block as usize;
        if self.bad[b] {
            self.counters.rule_violations += 1;
            return Err(NandError::BadBlock { op: "erase", block });
        }
        if self.erase_counts[b] >= self.geo.endurance {
            self.bad[b] = true;
            self.counters.worn_out_blocks += 1;
            self.counters.rule_violations += 1;
            return Err(NandError::WornOut {
                block,
                endurance: self.geo.endurance,
            });
        }
        Ok(())
    }

    /// Apply an erase checked by [`NativeFlashState::check_erase`]: the programmed pages' OOB
    /// returns to all ones, and their data buffers are kept for the next programs.
    pub fn apply_erase(&mut self, block: u32) {
        let b = block as usize;
        let programmed = self.next_page[b] as usize;
        if let Some(arena) = &mut self.oob[b] {
            arena[..programmed * self.geo.oob_bytes as usize].fill(0xFF);
        }
        if let Some(store) = &mut self.data {
            let ppb = self.geo.pages_per_block as usize;
            let first = b * ppb;
            for page in first..first + programmed {
                if let Some(buffer) = store.pages[page].take() {
                    store.stored -= 1;
                    store.recycle(buffer);
                }
            }
        }
        self.next_page[b] = 0;
        self.erase_counts[b] += 1;
        self.counters.erases += 1;
    }

    /// Count a refused call that broke a rule.
    pub fn note_violation(&mut self, error: &NandError) {
        if error.is_rule() {
            self.counters.rule_violations += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(overrides: &[(&str, &str)], store: bool) -> NativeFlashState {
        let mut all = vec![
            ("geometry.channels", "2"),
            ("geometry.chips_per_channel", "2"),
            ("geometry.dies_per_chip", "1"),
            ("geometry.planes_per_die", "2"),
            ("geometry.blocks_per_plane", "64"),
            ("geometry.pages_per_block", "8"),
            ("geometry.over_provisioning", "0.3"),
            ("cell.type", "slc"),
            ("cell.program_ns", "[200000]"),
        ];
        all.extend_from_slice(overrides);
        let owned: Vec<(String, String)> = all
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let config = Config::from_toml("", "t", &owned).unwrap();
        NativeFlashState::new(&config, store)
    }

    #[test]
    fn consecutive_blocks_go_round_channels_then_dies_then_planes() {
        let s = state(&[], false);
        let loc: Vec<(u32, u32, u32, u32)> = (0..9)
            .map(|b| {
                let l = s.locate(b).unwrap();
                (l.channel, l.die, l.plane, l.block_in_plane)
            })
            .collect();
        assert_eq!(
            loc,
            vec![
                (0, 0, 0, 0),
                (1, 0, 0, 0),
                (0, 1, 0, 0),
                (1, 1, 0, 0),
                (0, 0, 1, 0),
                (1, 0, 1, 0),
                (0, 1, 1, 0),
                (1, 1, 1, 0),
                (0, 0, 0, 1),
            ]
        );
        // Device dies are channel-major: channel 1's first die is device die 2.
        assert_eq!(s.locate(1).unwrap().device_die, 2);
        assert_eq!(s.locate(2).unwrap().device_die, 1);
        // Every (channel, die, plane, block) is reached exactly once.
        let mut seen = std::collections::BTreeSet::new();
        for b in 0..s.geometry().total_blocks {
            let l = s.locate(b).unwrap();
            assert!(seen.insert((l.channel, l.die, l.plane, l.block_in_plane)));
        }
    }

    #[test]
    fn programs_in_order_once_per_erase() {
        let mut s = state(&[], true);
        let data = vec![7u8; 4096];
        assert!(matches!(
            s.check_program(1, 4096, 0),
            Err(NandError::OutOfOrder { next: 0, .. })
        ));
        let (b, i) = s.check_program(0, 4096, 3).unwrap();
        s.apply_program(b, i, &data, &[1, 2, 3]);
        let err = s.check_program(0, 4096, 0).unwrap_err();
        assert!(matches!(err, NandError::NotErased { next: 1, .. }));
        assert!(err.to_string().contains("page 0") && err.to_string().contains("not erased"));
        let mut oob = vec![0u8; 128];
        s.copy_oob(0, 0, &mut oob);
        assert_eq!(&oob[..4], &[1, 2, 3, 0xFF]);
        s.copy_oob(0, 1, &mut oob);
        assert!(oob.iter().all(|&x| x == 0xFF));
        let mut out = vec![0u8; 4096];
        s.copy_data(0, 0, &mut out);
        assert_eq!(out, data);
        s.check_erase(0).unwrap();
        s.apply_erase(0);
        assert!(s.is_erased(0).unwrap());
        s.copy_data(0, 0, &mut out);
        assert!(out.iter().all(|&x| x == 0xFF));
        assert_eq!(s.erase_count(0).unwrap(), 1);
    }

    #[test]
    fn bad_arguments_name_the_argument() {
        let s = state(&[], false);
        let total = s.geometry().total_pages;
        let e = s.check_program(total, 4096, 0).unwrap_err();
        assert!(!e.is_rule());
        assert!(e.to_string().starts_with("page: page"), "{e}");
        let e = s.check_program(0, 100, 0).unwrap_err();
        assert!(e.to_string().starts_with("data: expected exactly"), "{e}");
        let e = s.check_program(0, 4096, 129).unwrap_err();
        assert!(e.to_string().starts_with("oob: expected at most"), "{e}");
        assert!(s.locate(s.geometry().total_blocks).is_err());
    }

    #[test]
    fn an_erase_past_the_endurance_makes_the_block_bad() {
        let mut s = state(&[("cell.endurance_cycles", "2")], false);
        for _ in 0..2 {
            s.check_erase(5).unwrap();
            s.apply_erase(5);
        }
        let e = s.check_erase(5).unwrap_err();
        assert_eq!(
            e,
            NandError::WornOut {
                block: 5,
                endurance: 2
            }
        );
        assert_eq!(s.bad_blocks(), vec![5]);
        assert!(matches!(
            s.check_program(5 * 8, 4096, 0),
            Err(NandError::BadBlock { .. })
        ));
        assert!(matches!(s.check_erase(5), Err(NandError::BadBlock { .. })));
    }
}
