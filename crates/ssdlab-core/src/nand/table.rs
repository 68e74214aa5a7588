//! Large flat tables (the L2P map, the validity bitmap, the OOB) allocated for random access.
//!
//! The maps are indexed at random and span hundreds of megabytes, so with 4 KiB pages nearly
//! every access also misses the TLB. On Linux the table is advised to use transparent huge pages
//! before it is first written (the kernel only backs untouched ranges with huge pages); this
//! changes speed, never contents.

/// A `Vec` of `len` copies of `value`, backed by huge pages where the OS allows it.
pub fn huge_table<T: Copy>(len: usize, value: T) -> Vec<T> {
    let mut table: Vec<T> = Vec::with_capacity(len);
    advise_huge_pages(
        table.as_mut_ptr() as *mut u8,
        len * std::mem::size_of::<T>(),
    );
    table.resize(len, value);
    table
}

/// An empty `Vec` with room for `capacity` items, that room advised to use huge pages before it
/// is first written: for a long buffer filled once and read in order (a replayed workload's
/// requests), where 4 KiB pages would cost a TLB miss every few dozen items.
pub fn huge_vec_with_capacity<T>(capacity: usize) -> Vec<T> {
    let mut buffer: Vec<T> = Vec::with_capacity(capacity);
    advise_huge_pages(
        buffer.as_mut_ptr() as *mut u8,
        capacity * std::mem::size_of::<T>(),
    );
    buffer
}

/// A zeroed table of `len` u32s on transparent huge pages where the kernel allows, whose memory
/// appears only as it is first written (the allocator maps zeroed pages lazily): for tables
/// most of which may never be touched, such as the OOB of a large, mostly empty device.
pub fn huge_zeroed_table(len: usize) -> Vec<u32> {
    let mut table = vec![0u32; len];
    advise_huge_pages(
        table.as_mut_ptr() as *mut u8,
        len * std::mem::size_of::<u32>(),
    );
    table
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(start: *mut u8, bytes: usize) {
    const HUGE: usize = 2 << 20;
    if bytes < 2 * HUGE {
        return;
    }
    let first = (start as usize).next_multiple_of(HUGE);
    let end = (start as usize + bytes) / HUGE * HUGE;
    if end > first {
        // SAFETY: the range lies inside this process's own allocation; MADV_HUGEPAGE is a hint
        // that cannot change its contents, and a failure (THP disabled) is harmless.
        unsafe {
            libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_start: *mut u8, _bytes: usize) {}

#[cfg(test)]
mod tests {
    #[test]
    fn table_has_the_requested_contents() {
        let t = super::huge_table(5 << 20, 7u32);
        assert_eq!(t.len(), 5 << 20);
        assert!(t.iter().all(|&v| v == 7));
    }

    #[test]
    fn zeroed_table_is_zero() {
        let t = super::huge_zeroed_table(5 << 20);
        assert_eq!(t.len(), 5 << 20);
        assert!(t.iter().all(|&v| v == 0));
    }
}
