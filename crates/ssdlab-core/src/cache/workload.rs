//! Block-level workloads for the SSD cache: filebench's fileserver, webserver, varmail and OLTP
//! personalities through a simple file allocator, and random read-heavy mixes.
//!
//! A personality is filebench's file set (file count, mean size) and flow (operations, their
//! I/O sizes and how often each runs per loop of the flow), from the `.f` files shipped with
//! filebench 1.4/1.5. Files live in fixed extents of the disk (file i at i × extent; an extent
//! holds twice the mean file size, and a file that outgrows it starts over, as if deleted and
//! recreated), sizes drawn uniformly in [½, 1½] × the mean. Under the application sits a page
//! cache that absorbs most file reads; the paper measured the block-level read fractions that
//! remain (fileserver 15.2 %, webserver 17.8 %, varmail 21.9 %, OLTP 8.6 %), and each read
//! request of the flow reaches the disk with the probability that gives that fraction — a
//! stand-in for the page cache, said as such. `r75` and `r90` are random 4 KiB requests over a
//! working set (default twice the cache) with 75 % and 90 % reads. Arrivals are Poisson with
//! the configured mean gap (open loop), from one seeded stream.

use super::AppRequest;
use rand::Rng;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The personalities, by name.
pub const PERSONALITIES: &[&str] = &["fileserver", "webserver", "varmail", "oltp", "r75", "r90"];

#[derive(Debug, Error, PartialEq, Eq)]
pub enum WorkloadError {
    #[error("workload.personality: unknown personality '{0}' (expected one of fileserver, webserver, varmail, oltp, r75, r90)")]
    UnknownPersonality(String),
    #[error("workload.{key}: {message}")]
    Invalid { key: &'static str, message: String },
}

/// A cache workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadSpec {
    pub personality: String,
    /// Application requests to generate.
    pub requests: u64,
    /// Mean gap between arrivals.
    pub interarrival_ns: u64,
    /// Bytes the workload spans; 0: twice the cache (r75, r90) or the personality's whole file
    /// set. For a personality, a smaller span keeps fewer of its files (at least one).
    pub working_set_bytes: u64,
    pub seed: u64,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            personality: "fileserver".into(),
            requests: 10_000,
            interarrival_ns: 1_000_000,
            working_set_bytes: 0,
            seed: 1,
        }
    }
}

/// One operation of a filebench flow, in blocks.
#[derive(Debug, Clone, Copy)]
enum FlowOp {
    /// Read a whole file (filebench `readwholefile`).
    ReadWhole,
    /// Write a whole new file (`createfile` + `writewholefile`).
    WriteWhole,
    /// Append `n` blocks (`appendfilerand`, mean size).
    Append(u32),
    /// Random read / write of `n` blocks inside a file (OLTP's `read`/`write random`).
    ReadRandom(u32),
    WriteRandom(u32),
    /// Sequential log write of `n` blocks (OLTP's log writer).
    LogWrite(u32),
}

struct Personality {
    files: u64,
    mean_file_blocks: u64,
    /// (operation, runs per loop of the flow).
    flow: &'static [(FlowOp, u32)],
    /// Block-level read fraction the paper measured under the page cache.
    read_fraction: f64,
}

fn personality(name: &str) -> Option<Personality> {
    use FlowOp::*;
    Some(match name {
        // fileserver.f: 10000 files of 128 KiB, whole-file writes and reads, 16 KiB appends.
        "fileserver" => Personality {
            files: 10_000,
            mean_file_blocks: 32,
            flow: &[(WriteWhole, 1), (Append(4), 1), (ReadWhole, 1)],
            read_fraction: 0.152,
        },
        // webserver.f: 1000 files of 16 KiB, ten whole-file reads and one 16 KiB log append.
        "webserver" => Personality {
            files: 1_000,
            mean_file_blocks: 4,
            flow: &[(ReadWhole, 10), (LogWrite(4), 1)],
            read_fraction: 0.178,
        },
        // varmail.f: 1000 files of 16 KiB; create+append+fsync, read+append+fsync, read.
        "varmail" => Personality {
            files: 1_000,
            mean_file_blocks: 4,
            flow: &[(WriteWhole, 1), (Append(4), 2), (ReadWhole, 2)],
            read_fraction: 0.219,
        },
        // oltp.f: 10 data files of 10 MiB, 2 KiB random reads (200 readers) and writes (10
        // writers, 100 per loop), a 256 KiB sequential log write; 2 KiB rounds up to a block.
        "oltp" => Personality {
            files: 10,
            mean_file_blocks: 2_560,
            flow: &[
                (ReadRandom(1), 200),
                (WriteRandom(1), 100),
                (LogWrite(64), 1),
            ],
            read_fraction: 0.086,
        },
        _ => return None,
    })
}

/// Exponential gap with mean `mean_ns` (integer ns).
fn gap<R: Rng>(rng: &mut R, mean_ns: u64) -> u64 {
    let u: f64 = 1.0 - rng.gen::<f64>();
    (-u.ln() * mean_ns as f64) as u64
}

/// Generate `spec`'s requests for a cache of `cache_blocks` over a disk of `disk_blocks`.
pub fn generate(
    spec: &WorkloadSpec,
    cache_blocks: u64,
    disk_blocks: u64,
) -> Result<Vec<AppRequest>, WorkloadError> {
    if spec.requests == 0 {
        return Err(WorkloadError::Invalid {
            key: "requests",
            message: "expected a positive request count, got 0".into(),
        });
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed ^ 0xF1E8_0CAC_4E00_0000);
    let block_bytes = 4096u64;
    let mut out = Vec::with_capacity(spec.requests as usize);
    let mut t = 0u64;
    let read_mix = match spec.personality.as_str() {
        "r75" => Some(0.75),
        "r90" => Some(0.90),
        _ => None,
    };
    if let Some(reads) = read_mix {
        let span = match spec.working_set_bytes {
            0 => 2 * cache_blocks,
            bytes => bytes / block_bytes,
        };
        if span == 0 || span > disk_blocks {
            return Err(WorkloadError::Invalid {
                key: "working_set_bytes",
                message: format!("expected 1 to {disk_blocks} blocks (the disk), got {span}"),
            });
        }
        for _ in 0..spec.requests {
            t += gap(&mut rng, spec.interarrival_ns);
            out.push(AppRequest {
                arrival_ns: t,
                write: rng.gen::<f64>() >= reads,
                block: rng.gen_range(0..span),
                blocks: 1,
            });
        }
        return Ok(out);
    }
    let p = personality(&spec.personality)
        .ok_or_else(|| WorkloadError::UnknownPersonality(spec.personality.clone()))?;
    let mut p = p;
    if spec.working_set_bytes > 0 {
        // A smaller file set of the same files (the quick scales of the study).
        p.files =
            (spec.working_set_bytes / block_bytes / (2 * p.mean_file_blocks)).clamp(1, p.files);
    }
    let extent = 2 * p.mean_file_blocks;
    // The log of webserver and OLTP follows the files.
    let log_start = p.files * extent;
    let log_blocks = extent.max(1024);
    let needed = log_start + log_blocks;
    if needed > disk_blocks {
        return Err(WorkloadError::Invalid {
            key: "personality",
            message: format!(
                "'{}' needs {needed} blocks of disk ({} files of {} blocks and a log), the disk has {disk_blocks} (cache.disk.capacity_bytes)",
                spec.personality, p.files, p.mean_file_blocks
            ),
        });
    }
    let mut sizes: Vec<u64> = (0..p.files)
        .map(|_| {
            rng.gen_range(p.mean_file_blocks / 2..=p.mean_file_blocks * 3 / 2)
                .max(1)
        })
        .collect();
    let mut log_head = 0u64;
    // Reads reach the disk with probability q: reads·q / (reads·q + writes) = read_fraction.
    let loop_reads: u32 = p
        .flow
        .iter()
        .filter(|(op, _)| matches!(op, FlowOp::ReadWhole | FlowOp::ReadRandom(_)))
        .map(|&(_, n)| n)
        .sum();
    let loop_writes: u32 = p.flow.iter().map(|&(_, n)| n).sum::<u32>() - loop_reads;
    let f = p.read_fraction;
    let q = (f * loop_writes as f64 / ((1.0 - f) * loop_reads as f64)).min(1.0);
    let total_runs: u32 = p.flow.iter().map(|&(_, n)| n).sum();
    while (out.len() as u64) < spec.requests {
        // One flow operation, drawn by its runs per loop (filebench's threads interleave).
        let mut pick = rng.gen_range(0..total_runs);
        let mut op = p.flow[0].0;
        for &(o, n) in p.flow {
            if pick < n {
                op = o;
                break;
            }
            pick -= n;
        }
        let file = rng.gen_range(0..p.files);
        let base = file * extent;
        let (write, block, blocks) = match op {
            FlowOp::ReadWhole => (false, base, sizes[file as usize]),
            FlowOp::WriteWhole => {
                let size = rng
                    .gen_range(p.mean_file_blocks / 2..=p.mean_file_blocks * 3 / 2)
                    .max(1);
                sizes[file as usize] = size;
                (true, base, size)
            }
            FlowOp::Append(n) => {
                let size = &mut sizes[file as usize];
                if *size + n as u64 > extent {
                    *size = 0; // outgrew its extent: recreated
                }
                let at = base + *size;
                *size += n as u64;
                (true, at, n as u64)
            }
            FlowOp::ReadRandom(n) | FlowOp::WriteRandom(n) => {
                let size = sizes[file as usize].max(n as u64);
                let at = base + rng.gen_range(0..=size - n as u64);
                (matches!(op, FlowOp::WriteRandom(_)), at, n as u64)
            }
            FlowOp::LogWrite(n) => {
                if log_head + n as u64 > log_blocks {
                    log_head = 0;
                }
                let at = log_start + log_head;
                log_head += n as u64;
                (true, at, n as u64)
            }
        };
        if !write && rng.gen::<f64>() >= q {
            continue; // absorbed by the page cache
        }
        t += gap(&mut rng, spec.interarrival_ns);
        out.push(AppRequest {
            arrival_ns: t,
            write,
            block,
            blocks: blocks as u32,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personalities_have_the_papers_read_fractions() {
        for (name, expected) in [
            ("fileserver", 0.152),
            ("webserver", 0.178),
            ("varmail", 0.219),
            ("oltp", 0.086),
            ("r75", 0.75),
            ("r90", 0.90),
        ] {
            let spec = WorkloadSpec {
                personality: name.into(),
                requests: 40_000,
                ..Default::default()
            };
            let reqs = generate(&spec, 1 << 16, 1 << 22).unwrap();
            let reads = reqs.iter().filter(|r| !r.write).count() as f64 / reqs.len() as f64;
            assert!(
                (reads - expected).abs() < 0.01,
                "{name}: {reads} vs {expected}"
            );
            assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
            assert!(reqs.iter().all(|r| r.block + r.blocks as u64 <= 1 << 22));
        }
    }

    #[test]
    fn unknown_personality_is_named() {
        let spec = WorkloadSpec {
            personality: "mailserver".into(),
            ..Default::default()
        };
        let err = generate(&spec, 100, 1000).unwrap_err().to_string();
        assert!(
            err.contains("workload.personality") && err.contains("mailserver"),
            "{err}"
        );
    }
}
