//! Page data of data-driven mode, stored by physical page.
//!
//! Only written pages hold memory. GC moves data with the page, an erase drops the block's
//! pages, and a page that was mapped but never given data (preconditioning writes) reads as
//! zeros, so reads always return exactly what the host last wrote.

use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct PageStore {
    pages: HashMap<u32, Box<[u8]>>,
    page_size: usize,
}

impl PageStore {
    pub fn new(page_size: usize) -> Self {
        PageStore {
            pages: HashMap::new(),
            page_size,
        }
    }

    pub fn get(&self, ppa: u32) -> Option<&[u8]> {
        self.pages.get(&ppa).map(|b| &b[..])
    }

    /// Copy page `ppa` (zeros when it holds no data) into `out`.
    pub fn read_into(&self, ppa: u32, out: &mut [u8]) {
        match self.pages.get(&ppa) {
            Some(data) => out.copy_from_slice(data),
            None => out.fill(0),
        }
    }

    pub fn put(&mut self, ppa: u32, data: Box<[u8]>) {
        debug_assert_eq!(data.len(), self.page_size);
        self.pages.insert(ppa, data);
    }

    /// Drop the data of a page that no longer holds live data (overwritten or trimmed), so
    /// that memory follows live data rather than everything ever written.
    pub fn remove(&mut self, ppa: u32) {
        self.pages.remove(&ppa);
    }

    /// GC relocation: the data follows the page.
    pub fn relocate(&mut self, src: u32, dst: u32) {
        if let Some(data) = self.pages.remove(&src) {
            self.pages.insert(dst, data);
        }
    }

    pub fn erase(&mut self, first_ppa: u32, pages: u32) {
        if self.pages.is_empty() {
            return;
        }
        for ppa in first_ppa..first_ppa + pages {
            self.pages.remove(&ppa);
        }
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    pub fn stored_pages(&self) -> usize {
        self.pages.len()
    }
}
