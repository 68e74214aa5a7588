//! A persistent image of the export (`--image FILE`): a sparse file that holds the export's
//! logical contents across server restarts, as qemu-nbd users expect of theirs.
//!
//! Writes go through to the file as they reach the device, in the device's order (the emulator
//! calls [`Image::write`] under the device lock); whole trimmed pages become holes. Like a
//! drive's volatile cache, the file is made durable (`fdatasync`) on FLUSH, on a FUA write and
//! at a clean shutdown, outside the device lock so that other connections do not wait for it.
//!
//! At start the device is rebuilt from the file: its allocated extents (found with
//! `SEEK_DATA`/`SEEK_HOLE`, so a sparse image costs nothing) are read in offset order and every
//! run of non-zero pages is written through the FTL; all-zero pages and holes stay unmapped, as
//! a trimmed page does. Then the device's clock and statistics are reset (the data, mapping and
//! wear are kept), so the fill is not part of what the server reports.

use ssdlab_core::{Device, DeviceError, HostRequest, Op};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ImageError {
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path}: the image is {actual} bytes but the export is {expected} bytes; use an image of the export's size, or a new path to create one")]
    SizeMismatch {
        path: String,
        actual: u64,
        expected: u64,
    },
    #[error("{path}: not a regular file")]
    NotAFile { path: String },
    #[error("{path}: in use by another server (locked)")]
    Locked { path: String },
    #[error("{path}: does not exist, and a read-only export cannot create it")]
    MissingReadOnly { path: String },
    #[error("{path}: rebuilding the device from the image: {source}")]
    Load { path: String, source: DeviceError },
}

/// The export's backing file.
#[derive(Debug)]
pub struct Image {
    file: File,
    path: PathBuf,
    size: u64,
    page_bytes: u64,
    /// Bytes of non-zero pages written into the device at start.
    pub loaded_bytes: u64,
    /// Successful `fdatasync` calls (FLUSH, FUA and shutdown).
    syncs: AtomicU64,
}

/// Rebuilding reads the image in pieces of this size.
const LOAD_CHUNK: u64 = 1 << 20;

impl Image {
    /// Open (or create, sparse) the image for an export of `size` bytes, lock it, and fill the
    /// device with its contents.
    pub fn open(path: &Path, device: &mut Device, read_only: bool) -> Result<Image, ImageError> {
        let shown = path.display().to_string();
        let io_err = |source| ImageError::Io {
            path: shown.clone(),
            source,
        };
        let size = device.logical_bytes();
        let exists = match std::fs::metadata(path) {
            Ok(meta) if !meta.is_file() => return Err(ImageError::NotAFile { path: shown }),
            Ok(_) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(io_err(e)),
        };
        if !exists && read_only {
            return Err(ImageError::MissingReadOnly { path: shown });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(!read_only)
            .create(!read_only)
            .truncate(false)
            .open(path)
            .map_err(io_err)?;
        lock(&file, read_only).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock => ImageError::Locked {
                path: shown.clone(),
            },
            _ => io_err(e),
        })?;
        let actual = file.metadata().map_err(io_err)?.len();
        if !exists {
            // A new image is all hole: it costs no space until written.
            file.set_len(size).map_err(io_err)?;
        } else if actual != size {
            return Err(ImageError::SizeMismatch {
                path: shown,
                actual,
                expected: size,
            });
        }
        let mut image = Image {
            file,
            path: path.to_path_buf(),
            size,
            page_bytes: device.page_size() as u64,
            loaded_bytes: 0,
            syncs: AtomicU64::new(0),
        };
        if exists {
            image.loaded_bytes = image.fill(device).map_err(|e| match e {
                LoadError::Io(source) => ImageError::Io {
                    path: shown.clone(),
                    source,
                },
                LoadError::Device(source) => ImageError::Load {
                    path: shown.clone(),
                    source,
                },
            })?;
            device.reset_measurements();
        }
        Ok(image)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Write every non-zero page of the image into the device, in offset order.
    fn fill(&self, device: &mut Device) -> Result<u64, LoadError> {
        let page = self.page_bytes;
        let mut buf = vec![0u8; LOAD_CHUNK as usize];
        let mut loaded = 0;
        let mut at = 0;
        while let Some((data, hole)) = next_extent(&self.file, at, self.size)? {
            // Device pages are the unit: an extent's partial pages at either end are read whole.
            let mut pos = data / page * page;
            let end = hole.div_ceil(page).saturating_mul(page).min(self.size);
            while pos < end {
                let len = LOAD_CHUNK.min(end - pos);
                let chunk = &mut buf[..len as usize];
                self.file.read_exact_at(chunk, pos)?;
                // Runs of non-zero pages become one write each.
                let mut run_start: Option<u64> = None;
                let pages = len.div_ceil(page);
                for i in 0..=pages {
                    let nonzero = i < pages && {
                        let lo = (i * page) as usize;
                        let hi = ((i + 1) * page).min(len) as usize;
                        chunk[lo..hi].iter().any(|&b| b != 0)
                    };
                    match (nonzero, run_start) {
                        (true, None) => run_start = Some(i),
                        (false, Some(first)) => {
                            let lo = first * page;
                            let hi = (i * page).min(len);
                            let req = HostRequest::new(Op::Write, pos + lo, hi - lo);
                            device
                                .submit(&req, Some(&chunk[lo as usize..hi as usize]), None)
                                .map_err(LoadError::Device)?;
                            loaded += hi - lo;
                            run_start = None;
                        }
                        _ => {}
                    }
                }
                pos += len;
            }
            at = end;
        }
        Ok(loaded)
    }

    /// Mirror a write the device accepted. Called under the device lock, so the file sees
    /// writes in the device's order.
    pub fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }

    /// Mirror a trim: the whole pages in the range read as zeros on the device (partial pages
    /// keep their data there), so they become a hole in the file.
    pub fn trim(&self, offset: u64, length: u64) -> io::Result<()> {
        let page = self.page_bytes;
        let lo = offset.div_ceil(page) * page;
        let hi = (offset.saturating_add(length) / page * page).min(self.size);
        if lo >= hi {
            return Ok(());
        }
        // SAFETY: fallocate on an open descriptor with in-range offsets; no memory is passed.
        let r = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                lo as libc::off_t,
                (hi - lo) as libc::off_t,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
            // A file system without holes: write the zeros instead.
            let zeros = vec![0u8; LOAD_CHUNK as usize];
            let mut at = lo;
            while at < hi {
                let n = LOAD_CHUNK.min(hi - at);
                self.file.write_all_at(&zeros[..n as usize], at)?;
                at += n;
            }
            return Ok(());
        }
        Err(err)
    }

    /// Make everything written so far durable (FLUSH, FUA, shutdown).
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

enum LoadError {
    Io(io::Error),
    Device(DeviceError),
}

impl From<io::Error> for LoadError {
    fn from(e: io::Error) -> Self {
        LoadError::Io(e)
    }
}

/// The next allocated extent at or after `from`: `(start of data, start of the hole after it)`,
/// or `None` past the last one. File systems without `SEEK_DATA` report the whole file as data.
fn next_extent(file: &File, from: u64, size: u64) -> io::Result<Option<(u64, u64)>> {
    if from >= size {
        return Ok(None);
    }
    let fd = file.as_raw_fd();
    // SAFETY: lseek on an open descriptor; it moves only the (unused) file position.
    let data = unsafe { libc::lseek(fd, from as libc::off_t, libc::SEEK_DATA) };
    if data < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ENXIO) => Ok(None),
            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => Ok(Some((from, size))),
            _ => Err(err),
        };
    }
    // SAFETY: as above.
    let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
    if hole < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Some(((data as u64).min(size), (hole as u64).min(size))))
}

/// One server per image: an exclusive lock for a writable export, a shared one for read-only
/// exports (several may read the same image).
fn lock(file: &File, read_only: bool) -> io::Result<()> {
    let how = if read_only {
        libc::LOCK_SH
    } else {
        libc::LOCK_EX
    };
    // SAFETY: flock on an open descriptor; the lock is released when the file is closed.
    if unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> Device {
        // 2 dies x 32 blocks x 32 pages of 4 KiB: small enough to build in a millisecond.
        let overrides: Vec<(String, String)> = [
            ("geometry.channels", "1"),
            ("geometry.chips_per_channel", "1"),
            ("geometry.dies_per_chip", "2"),
            ("geometry.planes_per_die", "1"),
            ("geometry.blocks_per_plane", "32"),
            ("geometry.pages_per_block", "32"),
            ("geometry.page_size_bytes", "4096"),
            ("geometry.over_provisioning", "0.25"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let toml = ssdlab_core::presets::get("slc").expect("preset");
        Device::from_toml(toml, "slc", &overrides, 1, true).unwrap()
    }

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ssdlab-image-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        dir
    }

    #[test]
    fn writes_survive_reopening_and_holes_stay_unmapped() {
        let path = tmp("reopen");
        let mut dev = device();
        let page = dev.page_size() as u64;
        let image = Image::open(&path, &mut dev, false).unwrap();
        assert_eq!(image.loaded_bytes, 0);
        let data: Vec<u8> = (0..3 * page).map(|i| (i % 251) as u8 + 1).collect();
        image.write(5 * page, &data).unwrap();
        image.write(100 * page + 7, b"tail").unwrap();
        image.trim(6 * page, page).unwrap();
        image.sync().unwrap();
        drop(image);

        let mut dev = device();
        let image = Image::open(&path, &mut dev, false).unwrap();
        // Pages 5 and 7 (6 was trimmed) and page 100.
        assert_eq!(image.loaded_bytes, 3 * page);
        assert_eq!(dev.now_ns(), 0, "the fill is not part of the measurements");
        let mut out = vec![0u8; 3 * page as usize];
        dev.submit(
            &HostRequest::new(Op::Read, 5 * page, 3 * page),
            None,
            Some(&mut out),
        )
        .unwrap();
        assert_eq!(&out[..page as usize], &data[..page as usize]);
        assert!(out[page as usize..2 * page as usize]
            .iter()
            .all(|&b| b == 0));
        assert_eq!(&out[2 * page as usize..], &data[2 * page as usize..]);
        let mut tail = [0u8; 4];
        dev.submit(
            &HostRequest::new(Op::Read, 100 * page + 7, 4),
            None,
            Some(&mut tail),
        )
        .unwrap();
        assert_eq!(&tail, b"tail");
        drop(image);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn size_mismatch_lock_and_read_only_are_errors() {
        let path = tmp("mismatch");
        std::fs::write(&path, b"short").unwrap();
        let err = Image::open(&path, &mut device(), false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the image is 5 bytes but the export is"),
            "{err}"
        );
        std::fs::remove_file(&path).unwrap();

        let first = Image::open(&path, &mut device(), false).unwrap();
        let err = Image::open(&path, &mut device(), false)
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("in use by another server (locked)"), "{err}");
        drop(first);
        std::fs::remove_file(&path).unwrap();

        let err = Image::open(&path, &mut device(), true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist"), "{err}");
        let dir = std::env::temp_dir();
        let err = Image::open(&dir, &mut device(), false)
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("not a regular file"), "{err}");
    }
}
