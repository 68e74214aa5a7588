//! A software prefetch hint. The mapping tables are far larger than the caches and are indexed
//! at random, so the FTL asks for the lines it will touch a little ahead of time; this changes
//! nothing but speed.

/// Hint that `slice[index]` will be read soon (no-op when out of range or off x86-64).
#[inline(always)]
pub fn prefetch<T>(slice: &[T], index: usize) {
    if let Some(item) = slice.get(index) {
        prefetch_line(item as *const T as usize);
    }
}

/// Hint that all of `slice[index]` will be read soon: every cache line it spans (an item
/// larger than a line, or one straddling two, needs more than its first line).
#[inline(always)]
pub fn prefetch_item<T>(slice: &[T], index: usize) {
    const LINE: usize = 64;
    if let Some(item) = slice.get(index) {
        let start = item as *const T as usize;
        let end = start + std::mem::size_of::<T>().max(1);
        let mut line = start & !(LINE - 1);
        while line < end {
            prefetch_line(line);
            line += LINE;
        }
    }
}

/// Ask for the cache line holding address `addr`.
#[inline(always)]
fn prefetch_line(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 only hints the cache; it cannot fault, even on a bad address.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Hint that the item at `ptr` will be read soon, from its address alone (no reference to it is
/// made: `ftl::l2p` prefetches entries whose streaming stores may not be ordered yet).
#[inline(always)]
pub fn prefetch_address<T>(ptr: *const T) {
    prefetch_line(ptr as usize);
}
