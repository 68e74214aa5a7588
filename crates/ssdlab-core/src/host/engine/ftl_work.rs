//! The work of one FTL call's list as queued transactions: GC moves (fused copyback steps on
//! one die, or a read released into a program through the controller), packed GC pages, the
//! victim's erase after the step's reads, and a cached-mapping FTL's translation reads and
//! programs as a chain after the list's device-CPU time. Host reads and writes, trims and
//! background GC all go through `ftl_ops_to_txns`.

use super::*;

/// The copyback moves of `ops` from `first` on between the blocks whose first pages are
/// `blocks` (source, destination), with the tR and tPROG of a page by its offset in its block
/// (an offset past a block's end, no entry, is a page of another block and ends the run), and
/// before a later move whose source `stop` says: where the run ends and its array time.
#[inline(always)]
fn copyback_run(
    ops: &[FlashOp],
    first: usize,
    (reads, programs): (&[u64], &[u64]),
    (src_first, dst_first): (u32, u32),
    stop: impl Fn(u32) -> bool,
) -> (usize, u64) {
    let (mut moves, mut busy) = (0, 0);
    for op in &ops[first..] {
        let FlashOp::Move { src, dst } = *op else {
            break;
        };
        let (read, program) = (
            src.wrapping_sub(src_first) as usize,
            dst.wrapping_sub(dst_first) as usize,
        );
        if read >= reads.len() || program >= programs.len() || (moves > 0 && stop(src)) {
            break;
        }
        busy += reads[read] + programs[program];
        moves += 1;
    }
    (first + moves, busy)
}

/// A cached-mapping FTL's translation work in one list, made into transactions as the list is
/// read: each translation read or program after the one before it, the first once the list's
/// device-CPU time is done (`ready`). A transaction that needs the mapping is chained after
/// `last`.
struct TranslationChain {
    class: TxnClass,
    /// When the list's CPU work is done: `start` until the list's first CPU or translation
    /// operation charges it.
    ready: u64,
    charged: bool,
    /// The first transaction, to queue once the list is made (NONE if gated or absent), and
    /// the last (NONE while the chain is empty).
    head: u32,
    last: u32,
}

/// The block of the last page looked up in a list of GC operations: its pages, its die, and
/// whether a host program of it is pending (then its pages are checked one by one).
struct BlockSeen {
    pages: std::ops::Range<u32>,
    block: u32,
    die: u32,
    pending: bool,
    /// Its erase not done yet, or NONE (a block opened before its erase ran: none of its
    /// programs has run, its data is all in the controller).
    erase: u32,
}

impl BlockSeen {
    const NONE: BlockSeen = BlockSeen {
        pages: 0..0,
        block: NONE,
        die: NONE,
        pending: false,
        erase: NONE,
    };
}

/// A fused copyback step being built: its transaction (or NONE), die, and the array time and
/// moves not yet added to it.
struct Fused {
    txn: u32,
    die: u32,
    array_ns: u64,
    moves: u32,
    /// First page of its destination block (one block per step: that block's next erase
    /// counts it among the programs it waits for).
    dst_first_page: u32,
}

impl Fused {
    const NONE: Fused = Fused {
        txn: NONE,
        die: NONE,
        array_ns: 0,
        moves: 0,
        dst_first_page: NONE,
    };
}

impl Device {
    /// The work of one FTL call as queued transactions, made in the list's order. GC work:
    /// each move a read released into a program, each packed GC page's program after the
    /// reads that fetched its units, the victim's erase after the step's reads; `request` (or
    /// NONE) waits for all of it, served at `class`. Translation work (a cached-mapping FTL's)
    /// is a chain of `chain_class` that starts at `start` once the list's device-CPU time is
    /// done. A translation program that the list makes after an erase of its block waits for
    /// that erase, one made before it goes first. Returns (when the CPU work is done, the
    /// chain's last transaction or NONE): a transaction that needs the mapping is chained
    /// after that last one.
    pub(super) fn ftl_ops_to_txns(
        &mut self,
        ops: &[FlashOp],
        start: u64,
        chain_class: TxnClass,
        request: u32,
        class: TxnClass,
        background: bool,
    ) -> (u64, u32) {
        let mut chain = TranslationChain {
            class: chain_class,
            ready: start,
            charged: false,
            head: NONE,
            last: NONE,
        };
        if ops.is_empty() {
            return (start, NONE);
        }
        let now = self.engine().now_ns;
        // Queued once the list is made, in this order: the chain's first transaction, the
        // erases, the reads and programs ready now (what waits for an erase made later in
        // the list is known only then; one that starts may release another of the list).
        let mut erases_now = std::mem::take(&mut self.engine().scratch_erases);
        erases_now.clear();
        // One batch per victim: the FTL lists a victim's moves, then its erase (a foreground
        // collection at the hard reserve may reclaim several victims in one list).
        let mut batch = self.engine().new_batch();
        let mut ready_now = std::mem::take(&mut self.engine().scratch_reads);
        ready_now.clear();
        // Copyback moves on one die run back to back as one die operation (the GC step),
        // one event instead of three per page; a host read may suspend it like a program.
        // The step's array time and moves are summed here and added to it once it is complete.
        let mut fused = Fused::NONE;
        // The last move's source and destination blocks: a step's moves come from one victim
        // and fill one frontier block.
        let (mut src_block, mut dst_block) = (BlockSeen::NONE, BlockSeen::NONE);
        // What the next packed GC program waits for: the read that fetched its last units, or
        // the program before it (programs of one frontier go in order).
        let mut feeder = NONE;
        let copyback = self.config.ftl.gc_copyback;
        // Copyback moves are counted once for the whole list (the same sums, fewer updates).
        let (mut copybacks, mut copyback_ns) = (0u64, 0u64);
        let mut i = 0;
        while i < ops.len() {
            let op = &ops[i];
            i += 1;
            // The die of a copyback move (source and destination on one die), or NONE.
            // A move whose source page's host program is not done takes its data from the
            // controller: no read (and no copyback, which senses the source on the die).
            let from_controller = match *op {
                FlashOp::Move { src, .. } | FlashOp::GcRead { src } => {
                    let seen = self.see_block(&mut src_block, src);
                    seen.pending
                        && (seen.erase != NONE
                            || self.engine.as_ref().expect("engine").program_pending(src))
                }
                _ => false,
            };
            let copyback_die = match *op {
                FlashOp::Move { dst, .. } if copyback && !from_controller => {
                    let die = src_block.die;
                    if die == self.see_block(&mut dst_block, dst).die {
                        die
                    } else {
                        NONE
                    }
                }
                _ => NONE,
            };
            if copyback_die != fused.die
                || (copyback_die != NONE && dst_block.pages.start != fused.dst_first_page)
            {
                self.end_fused(&mut fused);
            }
            match *op {
                FlashOp::Move { src, dst } if copyback_die != NONE => {
                    // This move and the copyback moves after it between the same two blocks
                    // (the same die): a run of one step, summed in one tight loop. A page's
                    // array times by its offset in the block: an offset past the block's end
                    // (no entry) is a page of another block, and ends the run.
                    let e = self.engine.as_ref().expect("engine");
                    let (reads, programs) = (&e.read_ns_at[..], &e.program_ns_at[..]);
                    let blocks = (src_block.pages.start, dst_block.pages.start);
                    let first = i - 1;
                    // The source block is one: a page of it whose program is pending is moved
                    // apart (checked only where the block has one).
                    let (end, busy) = if src_block.pending {
                        copyback_run(ops, first, (reads, programs), blocks, |src| {
                            e.program_pending(src)
                        })
                    } else {
                        copyback_run(ops, first, (reads, programs), blocks, |_| false)
                    };
                    // `see_block` put this move's pages in the two blocks: it is in the run.
                    debug_assert!(end > first, "a copyback run holds its first move");
                    i = end;
                    let moves = (i - first) as u32;
                    if self.stores_data() {
                        for op in &ops[first..i] {
                            if let FlashOp::Move { src, dst } = *op {
                                self.relocate_data(src, dst);
                            }
                        }
                    }
                    copybacks += moves as u64;
                    copyback_ns += busy;
                    if fused.txn == NONE {
                        let mut step = txn(TxnKind::Program, class, 0);
                        step.die = copyback_die;
                        step.plane = self.geo.plane_of(src);
                        step.ppa = dst;
                        step.request = request;
                        step.batch = batch;
                        step.background = background;
                        step.gc = true;
                        let e = self.engine();
                        fused.txn = e.new_txn(step);
                        fused.die = copyback_die;
                        fused.dst_first_page = dst_block.pages.start;
                        self.program_made(fused.txn, dst_block.block, dst_block.erase);
                        let e = self.engine();
                        e.batches[batch as usize].reads_left += 1;
                        if request != NONE {
                            e.request(request).pending += 1;
                        }
                        ready_now.push(fused.txn);
                    }
                    fused.array_ns += busy;
                    fused.moves += moves;
                }
                FlashOp::Move { src, dst } if from_controller => {
                    self.relocate_data(src, dst);
                    self.flash.gc_controller_reads += 1;
                    let program =
                        self.gc_program_txn(dst, &mut dst_block, class, request, background, false);
                    ready_now.push(program);
                }
                FlashOp::Move { src, dst } => {
                    self.relocate_data(src, dst);
                    let program =
                        self.gc_program_txn(dst, &mut dst_block, class, request, background, true);
                    let read = self.gc_read_txn(src, class, batch, request, background);
                    if self.flex {
                        // Decoded by the source's code, encoded by the destination's.
                        self.engine().txns[read as usize].after_ns =
                            self.flex_gc_codec_ns(src, dst);
                    }
                    self.engine().txns[read as usize].next = program;
                    ready_now.push(read);
                }
                FlashOp::GcRead { .. } if from_controller => {
                    // The units are in the controller already: the program that takes them
                    // waits only for what fed it before.
                    self.flash.gc_controller_reads += 1;
                }
                FlashOp::GcRead { src } => {
                    feeder = self.gc_read_txn(src, class, batch, request, background);
                    ready_now.push(feeder);
                }
                FlashOp::MoveUnit { src, dst } => {
                    self.relocate_data(src, dst);
                }
                FlashOp::GcProgram { dst } => {
                    let gated = feeder != NONE;
                    let id =
                        self.gc_program_txn(dst, &mut dst_block, class, request, background, gated);
                    if feeder == NONE {
                        ready_now.push(id);
                    } else {
                        self.engine().txns[feeder as usize].next = id;
                    }
                    feeder = id;
                }
                FlashOp::Erase { block, .. } => {
                    let erase_ns = self.config.cell.erase_ns;
                    self.count_erase(block, true, background);
                    let mut erase = self.at_page(
                        txn(TxnKind::Erase, TxnClass::Erase, erase_ns),
                        self.geo.first_page(block),
                    );
                    erase.request = request;
                    erase.background = background;
                    erase.gc = true;
                    let e = self.engine();
                    let id = e.new_txn(erase);
                    e.dies[erase.die as usize].queued_work_ns += erase_ns;
                    if request != NONE {
                        e.request(request).pending += 1;
                    }
                    e.batches[batch as usize].erase = id;
                    // It waits for the step's reads (the last one done releases it) and for
                    // the block's programs not started yet (a victim taken soon after it
                    // filled, whose programs wait for GC reads, a buffer slot or a die): on
                    // its die after them, so it never leaves them an erased block.
                    if e.batches[batch as usize].reads_left == 0 {
                        e.free_batches.push(batch);
                    } else {
                        e.txns[id as usize].gates += 1;
                    }
                    // A block opened before its previous erase ran, filled and collected
                    // again: its erases run in order (the programs between them wait for
                    // the first and are counted once it is done, see `erase_done`).
                    let e = self.engine();
                    let b = block as usize;
                    let previous = std::mem::replace(&mut e.block_work[b].erase, id);
                    if previous != NONE {
                        self.gate_on(previous, id);
                    } else if e.block_work[b].unstarted_programs > 0 {
                        e.txns[id as usize].gates += 1;
                        e.block_work[b].erase_blocked = id;
                    }
                    if self.engine().txns[id as usize].gates == 0 {
                        erases_now.push(id);
                    }
                    batch = self.engine().new_batch();
                    // The blocks looked at before may have changed state (this one is free).
                    (src_block, dst_block) = (BlockSeen::NONE, BlockSeen::NONE);
                }
                FlashOp::TranslationRead { .. } | FlashOp::TranslationProgram { .. } => {
                    self.charge_list_cpu(&mut chain, &ops[i - 1..]);
                    self.chain_translation(op, &mut chain);
                }
                FlashOp::DeviceCpu { .. } => self.charge_list_cpu(&mut chain, &ops[i - 1..]),
            }
        }
        self.end_fused(&mut fused);
        self.count_copybacks(copybacks, copyback_ns, background);
        let e = self.engine();
        if e.batches[batch as usize].reads_left == 0 {
            e.free_batches.push(batch);
        }
        // Not those that wait for their block's erase (decided before any is queued: one that
        // starts may release another of the list).
        let e = self.engine();
        ready_now.retain(|&id| e.txns[id as usize].gates == 0);
        if chain.head != NONE && e.txns[chain.head as usize].gates == 0 {
            self.enqueue_at(chain.head, chain.ready);
        }
        for &id in erases_now.iter().chain(&ready_now) {
            self.enqueue_at(id, now);
        }
        let e = self.engine();
        e.scratch_reads = ready_now;
        e.scratch_erases = erases_now;
        (chain.ready, chain.last)
    }

    /// `seen`, made the block of page `ppa` if it holds another.
    #[inline]
    fn see_block<'a>(&self, seen: &'a mut BlockSeen, ppa: u32) -> &'a BlockSeen {
        if !seen.pages.contains(&ppa) {
            let block = self.geo.block_of(ppa);
            let pages = self.geo.block_pages(block);
            let e = self.engine.as_ref().expect("engine");
            let work = &e.block_work[block as usize];
            let erase = work.erase;
            *seen = BlockSeen {
                pending: erase != NONE || work.pending_host_programs > 0,
                pages,
                block,
                die: self.geo.die_of_block(block),
                erase,
            };
        }
        seen
    }

    /// Add the fused copyback step's summed array time and moves to its transaction and its
    /// die's queued work; the next copyback move starts a new step.
    fn end_fused(&mut self, fused: &mut Fused) {
        if fused.txn != NONE {
            let e = self.engine();
            let t = &mut e.txns[fused.txn as usize];
            t.array_ns += fused.array_ns;
            t.moves += fused.moves;
            e.dies[fused.die as usize].queued_work_ns += fused.array_ns;
        }
        *fused = Fused::NONE;
    }

    /// Count `moves` copyback moves (a GC read and a GC program each, inside the die) whose
    /// array times sum to `busy_ns`: what `count_gc_read` and `count_gc_program` add per move.
    fn count_copybacks(&mut self, moves: u64, busy_ns: u64, background: bool) {
        if moves == 0 {
            return;
        }
        self.flash.array_reads += moves;
        self.flash.oob_reads += moves;
        self.flash.programs += moves;
        self.flash.oob_writes += moves;
        self.count_gc_busy(busy_ns, background);
        let n = moves as u32; // a list holds far fewer moves than 2^32
        self.work.reads += n;
        self.work.oob_reads += n;
        self.work.programs += n;
        self.work.flash_ns += busy_ns;
    }

    /// `ftl_ops_to_txns` for the FTL work of a host write or trim (request `slot`): its
    /// translation chain and its foreground GC both at host-write class, the GC waited for.
    /// Most writes bring none: that case costs no call.
    #[inline]
    pub(super) fn host_write_work_to_txns(
        &mut self,
        ops: &[FlashOp],
        start: u64,
        slot: u32,
    ) -> (u64, u32) {
        if ops.is_empty() {
            return (start, NONE);
        }
        let class = TxnClass::HostWrite;
        self.ftl_ops_to_txns(ops, start, class, slot, class, false)
    }

    /// Charge the list's device-CPU time (its CPU operations from `rest`, the rest of the
    /// list, on: none came before) once, at its first CPU or translation operation.
    fn charge_list_cpu(&mut self, chain: &mut TranslationChain, rest: &[FlashOp]) {
        if chain.charged {
            return;
        }
        chain.charged = true;
        let cpu_ns: u64 = rest
            .iter()
            .map(|op| match *op {
                FlashOp::DeviceCpu { ns } => ns,
                _ => 0,
            })
            .sum();
        if cpu_ns > 0 {
            chain.ready = self.charge_cpu(chain.ready, cpu_ns);
        }
    }

    /// Translation read or program `op` as the chain's next transaction.
    fn chain_translation(&mut self, op: &FlashOp, chain: &mut TranslationChain) {
        let (decode, encode) = (self.derived.decode_ns, self.derived.encode_ns);
        let (mut t, ppa) = match *op {
            FlashOp::TranslationRead { ppa } => {
                let t_read = self.count_translation_read(ppa);
                let mut t = txn(TxnKind::Read, chain.class, t_read);
                t.after_ns = decode;
                (t, ppa)
            }
            FlashOp::TranslationProgram { ppa } => {
                let t_prog = self.count_translation_program(ppa);
                (txn(TxnKind::Program, chain.class, t_prog), ppa)
            }
            _ => unreachable!("only translation operations are chained"),
        };
        t = self.at_page(t, ppa);
        t.transfers = 1;
        t.gates = (chain.last != NONE) as u8;
        t.not_before_ns = chain.ready;
        let e = self.engine();
        let id = e.new_txn(t);
        e.dies[t.die as usize].queued_work_ns += t.array_ns;
        if t.kind == TxnKind::Program {
            // After an erase of its block made earlier in the list (or before it), gated on it.
            self.program_made_in(id, self.geo.block_of(ppa));
        }
        let e = self.engine();
        if chain.last == NONE {
            chain.head = id;
        } else {
            if t.kind == TxnKind::Program {
                e.txns[chain.last as usize].after_ns += encode;
            }
            e.txns[chain.last as usize].next = id;
        }
        chain.last = id;
    }

    /// A GC read of `src` through the controller, counted, and in `batch` (the victim's erase
    /// waits for it); its completion releases what is chained to it after decode and re-encode.
    fn gc_read_txn(
        &mut self,
        src: u32,
        class: TxnClass,
        batch: u32,
        request: u32,
        background: bool,
    ) -> u32 {
        let t_read = self.derived.read_ns[self.geo.page_type(src) as usize];
        self.count_gc_read(t_read, true, background);
        let mut read = self.at_page(txn(TxnKind::Read, class, t_read), src);
        read.transfers = 1;
        read.batch = batch;
        read.after_ns = self.derived.decode_ns + self.derived.encode_ns;
        let e = self.engine();
        e.batches[batch as usize].reads_left += 1;
        e.gc_txn(read, request, background)
    }

    /// A GC program of `dst` through the controller, counted; `gated`: it waits to be released
    /// by what feeds it its data. `dst_block` (the list's last destination block, made
    /// `dst`'s) gives its block and that block's erase not done yet, which it waits for.
    fn gc_program_txn(
        &mut self,
        dst: u32,
        dst_block: &mut BlockSeen,
        class: TxnClass,
        request: u32,
        background: bool,
        gated: bool,
    ) -> u32 {
        let seen = self.see_block(dst_block, dst);
        let (block, erase) = (seen.block, seen.erase);
        let t_prog = self.derived.program_ns[self.geo.page_type(dst) as usize];
        self.count_gc_program(t_prog, true, background);
        let mut program = self.at_page(txn(TxnKind::Program, class, t_prog), dst);
        program.transfers = 1;
        program.gates = gated as u8;
        let id = self.engine().gc_txn(program, request, background);
        self.program_made(id, block, erase);
        id
    }
}
