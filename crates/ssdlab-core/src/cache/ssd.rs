//! The SSD under a [`super::FlashCache`]: what the cache asks of it, implemented by the
//! simulated [`Device`], and by a recorder and a replayer that measure the cache layer alone.
//!
//! The cache-layer benchmark runs a workload once through a [`RecordingSsd`] (a device that
//! keeps every completion it returns) and then again through a [`ReplaySsd`] that answers each
//! request with the recorded completion: the cache takes exactly the same decisions (the same
//! lookups, evictions, cleaning, disk accesses), while the SSD costs one sequential read of the
//! log. The second run's time is the cache layer's own.

use crate::host::{Completion, Device, DeviceError};
use crate::request::HostRequest;

/// What the cache needs of the SSD it runs on.
pub trait CacheSsd {
    fn page_size(&self) -> u32;
    fn logical_bytes(&self) -> u64;
    fn stores_data(&self) -> bool;
    /// The latest issue time seen (requests are never issued before it).
    fn now_ns(&self) -> u64;
    fn submit_at(
        &mut self,
        issue_ns: u64,
        req: &HostRequest,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError>;
    /// A hint that `req` will be submitted soon (its mapping lines are worth fetching).
    fn prefetch_request(&self, _req: &HostRequest, _dependent: bool) {}
    /// The placement handle of FlexECC's EDC (CRC) region, None when there is none.
    fn edc_handle(&self) -> Option<u32> {
        None
    }
    /// The placement handle of the block holding the logical page at byte `offset`.
    fn block_handle_of_offset(&self, _offset: u64) -> Option<u32> {
        None
    }
    /// Flip one bit of the stored page at byte `offset`; false when nothing is stored there.
    fn inject_bit_flip(&mut self, _offset: u64) -> bool {
        false
    }
    /// `(RBER, seed)` when corruptions are planned as points (`flexecc.injection = "points"`
    /// and RBER > 0); None otherwise.
    fn point_injection(&self) -> Option<(f64, u64)> {
        None
    }
}

impl CacheSsd for Device {
    fn page_size(&self) -> u32 {
        Device::page_size(self)
    }
    fn logical_bytes(&self) -> u64 {
        Device::logical_bytes(self)
    }
    fn stores_data(&self) -> bool {
        Device::stores_data(self)
    }
    #[inline]
    fn now_ns(&self) -> u64 {
        Device::now_ns(self)
    }
    #[inline]
    fn submit_at(
        &mut self,
        issue_ns: u64,
        req: &HostRequest,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError> {
        Device::submit_at(self, issue_ns, req, data, out)
    }
    #[inline]
    fn prefetch_request(&self, req: &HostRequest, dependent: bool) {
        Device::prefetch_request(self, req, dependent)
    }
    fn edc_handle(&self) -> Option<u32> {
        self.flexecc_edc_handle()
    }
    fn block_handle_of_offset(&self, offset: u64) -> Option<u32> {
        Device::block_handle_of_offset(self, offset)
    }
    fn inject_bit_flip(&mut self, offset: u64) -> bool {
        Device::inject_bit_flip(self, offset)
    }
    fn point_injection(&self) -> Option<(f64, u64)> {
        let config = self.config();
        (config.flexecc.injection == crate::ecc::flex::Injection::Points
            && config.ecc.rber_base > 0.0)
            .then(|| (config.ecc.rber_base, self.seed()))
    }
}

/// A device that logs every completion it returns (for [`ReplaySsd`]).
pub struct RecordingSsd {
    pub device: Device,
    pub log: Vec<Completion>,
}

impl RecordingSsd {
    pub fn new(device: Device) -> RecordingSsd {
        RecordingSsd {
            device,
            log: Vec::new(),
        }
    }

    /// A replayer of what was recorded, on the same geometry.
    pub fn replay(&self) -> ReplaySsd {
        ReplaySsd {
            log: self.log.clone(),
            next: 0,
            now_ns: 0,
            page_size: self.device.page_size(),
            logical_bytes: self.device.logical_bytes(),
        }
    }
}

impl CacheSsd for RecordingSsd {
    fn page_size(&self) -> u32 {
        self.device.page_size()
    }
    fn logical_bytes(&self) -> u64 {
        self.device.logical_bytes()
    }
    fn stores_data(&self) -> bool {
        self.device.stores_data()
    }
    fn now_ns(&self) -> u64 {
        self.device.now_ns()
    }
    fn submit_at(
        &mut self,
        issue_ns: u64,
        req: &HostRequest,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError> {
        let done = self.device.submit_at(issue_ns, req, data, out)?;
        self.log.push(done);
        Ok(done)
    }
    fn prefetch_request(&self, req: &HostRequest, dependent: bool) {
        self.device.prefetch_request(req, dependent)
    }
    fn edc_handle(&self) -> Option<u32> {
        CacheSsd::edc_handle(&self.device)
    }
    fn block_handle_of_offset(&self, offset: u64) -> Option<u32> {
        self.device.block_handle_of_offset(offset)
    }
    fn inject_bit_flip(&mut self, offset: u64) -> bool {
        self.device.inject_bit_flip(offset)
    }
    fn point_injection(&self) -> Option<(f64, u64)> {
        CacheSsd::point_injection(&self.device)
    }
}

/// Answers the requests of a cache run with the completions a [`RecordingSsd`] logged in the
/// same run (metadata only; no scrubbing or injection: those ask the flash's state).
pub struct ReplaySsd {
    log: Vec<Completion>,
    next: usize,
    now_ns: u64,
    page_size: u32,
    logical_bytes: u64,
}

impl ReplaySsd {
    /// Completions not yet replayed (0 after a faithful replay).
    pub fn remaining(&self) -> usize {
        self.log.len() - self.next
    }
}

impl CacheSsd for ReplaySsd {
    fn page_size(&self) -> u32 {
        self.page_size
    }
    fn logical_bytes(&self) -> u64 {
        self.logical_bytes
    }
    fn stores_data(&self) -> bool {
        false
    }
    #[inline]
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
    #[inline]
    fn submit_at(
        &mut self,
        issue_ns: u64,
        _req: &HostRequest,
        _data: Option<&[u8]>,
        _out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError> {
        let Some(&done) = self.log.get(self.next) else {
            return Err(DeviceError::Run(
                "replay: the cache issued more SSD requests than were recorded",
            ));
        };
        self.next += 1;
        self.now_ns = self.now_ns.max(issue_ns);
        Ok(done)
    }
}
