//! SQLite's write-ahead log layout (file format, section 4.1): a 32-byte header, then frames
//! of a 24-byte header and one page. A frame header's bytes 0-3 hold the page number, big
//! endian; the WAL header's bytes 8-11 the page size.

/// Bytes of the WAL header.
pub const HEADER_BYTES: u64 = 32;
/// Bytes of a frame header.
pub const FRAME_HEADER_BYTES: u64 = 24;

/// The page size a WAL header names (0 if `header` is too short to hold one).
pub fn page_size(header: &[u8]) -> u32 {
    be_u32(header, 8).unwrap_or(0)
}

/// The database page a frame header written at `offset` names, when `data` is a frame header
/// at a frame's start in a WAL of `page_size`-byte pages (None for anything else: the WAL
/// header, a page, a frame header not at a frame boundary, page number 0).
pub fn frame_page(data: &[u8], offset: u64, page_size: u32) -> Option<u32> {
    if page_size == 0 || offset < HEADER_BYTES || (data.len() as u64) < FRAME_HEADER_BYTES {
        return None;
    }
    let frame = FRAME_HEADER_BYTES + u64::from(page_size);
    if (offset - HEADER_BYTES) % frame != 0 {
        return None;
    }
    be_u32(data, 0).filter(|&page| page != 0)
}

/// A big-endian u32 at `at`, if `data` holds it.
pub fn be_u32(data: &[u8], at: usize) -> Option<u32> {
    let bytes = data.get(at..at + 4)?;
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_found_only_at_frame_starts() {
        let mut header = [0u8; 24];
        header[..4].copy_from_slice(&7u32.to_be_bytes());
        assert_eq!(frame_page(&header, 32, 4096), Some(7));
        assert_eq!(frame_page(&header, 32 + 4120, 4096), Some(7));
        assert_eq!(
            frame_page(&header, 32 + 24, 4096),
            None,
            "a page, not a frame header"
        );
        assert_eq!(frame_page(&header, 0, 4096), None, "the WAL header");
        assert_eq!(frame_page(&header, 32, 0), None, "page size not yet known");
        assert_eq!(frame_page(&[0u8; 24], 32, 4096), None, "page number 0");
        assert_eq!(frame_page(&header[..8], 32, 4096), None, "too short");
    }

    #[test]
    fn the_header_names_the_page_size() {
        let mut header = [0u8; 32];
        header[8..12].copy_from_slice(&4096u32.to_be_bytes());
        assert_eq!(page_size(&header), 4096);
        assert_eq!(page_size(&header[..10]), 0);
    }
}
