//! Host requests into transactions: a read's pages (served from the controller while their
//! program is pending, melded where they share a wordline), a write's units through the FTL
//! into staged page programs and the write buffer, trims and flushes.

use super::*;

impl Device {
    /// Translate a request issued at `issue_ns` (the engine's present) into transactions.
    pub(crate) fn engine_submit(
        &mut self,
        req: &HostRequest,
        issue_ns: u64,
        slot: u32,
    ) -> Result<(), DeviceError> {
        self.check_range(req)?;
        self.requests_seen += 1;
        // `self.work` holds the background GC done since the last request (its log row
        // carries it, as on the reservation path); it is cleared once the row is made.
        {
            let e = self.engine();
            if e.requests.len() <= slot as usize {
                e.requests
                    .resize(slot as usize + 1, RequestState::default());
            }
            e.requests[slot as usize] = RequestState {
                // One part for the request itself, released at the end of translation, so it
                // cannot complete while its transactions are still being created.
                pending: 1,
                complete_ns: issue_ns,
                ..Default::default()
            };
        }
        let page = self.page_size() as u64;
        let (first_unit, units, start) = self.split_and_charge_cpu(req, issue_ns);
        let result = match req.op {
            Op::Read => {
                let read = self.engine_read(req, start, first_unit, units, slot);
                if self.flex && read.is_ok() {
                    self.flex_note_read(req, first_unit, units, None);
                }
                read
            }
            Op::Write => {
                let write = self.engine_write(req, start, first_unit, units, slot);
                if self.flex && write.is_ok() {
                    self.flex_note_write(req, first_unit, units, start);
                }
                if write.is_ok() && self.write_waits_for_flash(req) {
                    self.engine_make_durable(start, slot);
                }
                write
            }
            Op::Trim => {
                self.engine_trim(req, start, first_unit, units, slot);
                Ok(())
            }
            // Without a volatile cache every completed write is durable already.
            Op::Flush if !self.config.controller.volatile_write_cache => Ok(()),
            Op::Flush => {
                self.engine_make_durable(start, slot);
                Ok(())
            }
        };
        if self.request_log.is_some() {
            // The flash work is known now; the duration when the request completes (the row
            // holds the issue time until then).
            let mut row = super::super::request_log_row(
                self.requests_seen,
                req,
                issue_ns,
                issue_ns,
                page,
                &self.work,
            );
            row.duration_ns = issue_ns;
            let rows = &mut self.engine().log_rows;
            if rows.len() <= slot as usize {
                rows.resize(slot as usize + 1, None);
            }
            rows[slot as usize] = Some(row);
        }
        self.work = Default::default();
        self.engine().part_done(slot, start);
        result
    }

    fn engine_read(
        &mut self,
        req: &HostRequest,
        start: u64,
        first_unit: u64,
        units: u64,
        slot: u32,
    ) -> Result<(), DeviceError> {
        self.learn_read_group(first_unit, units);
        let unit_bytes = self.unit_bytes;
        let bits = self.geo.bits_per_cell as usize;
        // (page, bytes wanted from it, codewords they take); units of one page are read once.
        let mut mapped = std::mem::take(&mut self.engine().scratch_pages);
        mapped.clear();
        let mut immediate_bytes = 0;
        // Translation chains (DFTL): (page, when its mapping is known, chain's last txn).
        let mut chains: Vec<(u32, u64, u32)> = Vec::new();
        for i in 0..units {
            let unit = first_unit + i;
            let (lo, hi) = page_span(req, unit, unit_bytes);
            self.ops.clear();
            let mut ops = std::mem::take(&mut self.ops);
            let found = self.ftl.lookup(unit, &mut ops);
            let mut chain = (start, NONE);
            if !ops.is_empty() {
                chain = self.ftl_ops_to_txns(
                    &ops,
                    start,
                    TxnClass::HostRead,
                    NONE,
                    TxnClass::HostWrite,
                    false,
                );
            }
            self.ops = ops;
            let found_page = self.page_to_read(unit, found, start);
            if let Some(ppa) = found_page.filter(|_| chain != (start, NONE)) {
                chains.push((ppa, chain.0, chain.1));
            }
            let Some(ppa) = found_page else {
                self.flash.controller_reads += found.is_some() as u64;
                immediate_bytes += hi - lo;
                continue;
            };
            let codewords = self.unit_codewords(lo, hi);
            match mapped.last_mut() {
                Some((last, bytes, words)) if *last == ppa => {
                    *bytes += hi - lo;
                    *words += codewords;
                }
                _ => mapped.push((ppa, hi - lo, codewords)),
            }
        }
        if immediate_bytes > 0 {
            let end = self
                .link_out
                .reserve(start, self.link_ns(immediate_bytes), start);
            let e = self.engine();
            e.request(slot).complete_ns = e.request(slot).complete_ns.max(end);
        }
        let melding = self.config.host.melded_reads != MeldedReads::Off && bits > 1;
        // Each page once, with the bytes wanted from all its units.
        self.merge_repeated_pages(
            &mut mapped,
            |&(ppa, _, _)| ppa,
            |kept, unit| {
                kept.1 += unit.1;
                kept.2 += unit.2;
            },
        );
        if melding && mapped.len() > 1 {
            mapped.sort_unstable_by_key(|&(ppa, _, _)| ppa);
        }
        let mut i = 0;
        while i < mapped.len() {
            let ppa = mapped[i].0;
            let (n, meld) = if melding {
                self.wordline_run(&mapped, i, |&(p, _, _)| p)
            } else {
                (1, false)
            };
            let all = self.derived.codewords_per_page;
            let (array_ns, n, transfers, codewords) = if meld {
                self.count_melded_read(n as u32);
                (self.derived.melded_read_ns, n, bits, all)
            } else {
                let array_ns = self.derived.read_ns[self.geo.page_type(ppa) as usize];
                // Only the codewords wanted cross the channel (NAND's random data out).
                let codewords = mapped[i].2.min(all);
                let xfer = self.derived.codeword_transfer_ns[codewords as usize];
                self.count_host_read_codewords(1, codewords, array_ns + xfer);
                (array_ns, 1, 1, codewords)
            };
            let host_bytes: u64 = mapped[i..i + n].iter().map(|&(_, b, _)| b).sum();
            let mut t = self.at_page(txn(TxnKind::Read, TxnClass::HostRead, array_ns), ppa);
            t.transfers = transfers as u16;
            if codewords < all {
                t.codewords = codewords as u16;
            }
            t.decode_pages = n as u32;
            t.host_bytes = host_bytes;
            t.request = slot;
            self.work.first_ppa.get_or_insert(ppa);
            let mut ready = start;
            for &(page, at, last) in chains.iter() {
                if mapped[i..i + n].iter().any(|&(p, _, _)| p == page) {
                    ready = ready.max(at);
                    if last != NONE {
                        t.gates += 1;
                    }
                }
            }
            let gated = t.gates > 0;
            t.not_before_ns = ready;
            let e = self.engine();
            let id = e.new_txn(t);
            e.dies[t.die as usize].queued_work_ns += array_ns;
            e.request(slot).pending += 1;
            for &(page, _, last) in chains.iter() {
                if last != NONE && mapped[i..i + n].iter().any(|&(p, _, _)| p == page) {
                    e.txns[last as usize].next = id;
                }
            }
            if !gated {
                self.enqueue_at(id, ready);
            }
            i += n;
        }
        self.engine().scratch_pages = mapped;
        Ok(())
    }

    /// A trim's units deallocated; the FTL's work for them (a cached-mapping FTL's
    /// translation reads and write-backs, and any GC those need) is queued like a write's,
    /// and the trim completes when the last of it is done.
    fn engine_trim(
        &mut self,
        req: &HostRequest,
        start: u64,
        first_unit: u64,
        units: u64,
        slot: u32,
    ) {
        for i in 0..units {
            self.ops.clear();
            let mut ops = std::mem::take(&mut self.ops);
            self.trim_unit(req, first_unit + i, start, &mut ops);
            let (ready, last) = self.host_write_work_to_txns(&ops, start, slot);
            self.ops = ops;
            let e = self.engine();
            if last != NONE {
                e.txns[last as usize].request = slot;
                e.request(slot).pending += 1;
            }
            let r = e.request(slot);
            r.complete_ns = r.complete_ns.max(ready);
        }
    }

    fn engine_write(
        &mut self,
        req: &HostRequest,
        start: u64,
        first_unit: u64,
        units: u64,
        slot: u32,
    ) -> Result<(), DeviceError> {
        let resolved = self.placement.resolve(&req.hint)?;
        let (handle, encode) = self.flex_write_handle(req, resolved);
        let unit_bytes = self.unit_bytes;
        let buffer_pages = self.config.controller.write_buffer_pages;
        for i in 0..units {
            let unit = first_unit + i;
            let (lo, hi) = page_span(req, unit, unit_bytes);
            let arrive = self.host_data_in(start, hi - lo);
            let write = UnitWrite {
                unit,
                handle,
                plane: 0,
                now_ns: start,
                host_bytes: (hi - lo) as u32,
            };
            if let Some(outcome) = self.merge_into_buffered_page(&write, arrive + encode) {
                self.note_read_group_written(&req.hint, unit, outcome.new);
                self.store_unit_write(req, unit, (lo, hi), outcome, None);
                let r = self.engine().request(slot);
                r.complete_ns = r.complete_ns.max(arrive);
                continue;
            }
            let plane = self.host_plane_for(&req.hint, unit, handle, start);
            self.ops.clear();
            let mut ops = std::mem::take(&mut self.ops);
            let outcome = self.ftl.write(UnitWrite { plane, ..write }, &mut ops);
            // Foreground GC: this write waits for it (throttling by the shortage).
            let (mapping_ready, last) = self.host_write_work_to_txns(&ops, start, slot);
            self.ops = ops;
            let outcome = outcome?;
            self.note_read_group_written(&req.hint, unit, outcome.new);
            self.store_unit_write(req, unit, (lo, hi), outcome, None);
            let ppa = outcome.new >> self.unit_shift;
            // The page's program: new with its first unit, gated until the page is full (and
            // until the translation work its mapping needed is done).
            let p = self.staged_program(ppa, !outcome.fills_page);
            {
                let e = self.engine();
                if last != NONE {
                    e.txns[last as usize].next = p;
                    e.txns[p as usize].gates += 1;
                }
                let t = &mut e.txns[p as usize];
                t.not_before_ns = t.not_before_ns.max(arrive + encode).max(mapping_ready);
            }
            if let Some(old) = self.rmw_source(outcome, hi - lo, start) {
                self.flash.rmw_reads += 1;
                let t_read = self.derived.read_ns[self.geo.page_type(old) as usize];
                self.count_host_read(1, t_read + self.derived.page_transfer_ns);
                // The old page is on the write's critical path: read it as a host read (served
                // first, and it may suspend what its die is doing), not behind queued GC.
                let mut read = self.at_page(txn(TxnKind::Read, TxnClass::HostRead, t_read), old);
                read.transfers = 1;
                read.next = p;
                read.after_ns = self.derived.decode_ns;
                let e = self.engine();
                e.txns[p as usize].gates += 1;
                if buffer_pages == 0 {
                    // Write-through: the request waits for its merged data to be on flash.
                    read.request = slot;
                    e.request(slot).pending += 1;
                }
                let r = e.new_txn(read);
                e.dies[read.die as usize].queued_work_ns += t_read;
                self.enqueue_at(r, start);
            }
            if !outcome.fills_page {
                // Staged: the unit's data is in the controller once it has arrived.
                let r = self.engine().request(slot);
                r.complete_ns = r.complete_ns.max(arrive);
                continue;
            }
            let staged = &mut self.engine().staged_programs;
            if !staged.is_empty() {
                staged.remove(&ppa);
            }
            if !self.staged.is_empty() {
                // Begun outside the run (or in an earlier one): no longer staged.
                self.staged.remove(&ppa);
            }
            self.count_host_program(ppa);
            let e = self.engine();
            if buffer_pages > 0 {
                e.txns[p as usize].buffer_id = Some(e.buffer_next_id);
                e.buffered_programs.insert(ppa, p);
                e.buffer_outstanding.insert(e.buffer_next_id);
                e.buffer_next_id += 1;
                if e.buffer_used < buffer_pages {
                    e.buffer_used += 1;
                    let r = e.request(slot);
                    r.complete_ns = r.complete_ns.max(arrive);
                } else {
                    // Data stays on the host until a buffer slot frees.
                    e.txns[p as usize].gates += 1;
                    e.request(slot).pending += 1;
                    e.buffer_waiting.push_back((p, slot, arrive));
                }
            } else {
                e.txns[p as usize].request = slot;
                e.request(slot).pending += 1;
            }
            // The page is full: the fill gate opens.
            self.release(p, arrive + encode);
        }
        Ok(())
    }

    /// A write-back buffer absorbs overwrites: a unit whose copy is in a host page still in the
    /// buffer (its program made and not started, of the write's own handle) takes the write's
    /// data there, as a controller updates its DRAM. The page's program then starts no earlier
    /// than `ready` (the data in and encoded): queued at its die, it leaves the queue and joins
    /// it again then. A program already waiting for data (its own, or a merged write's) takes
    /// only writes whose data is in by then, so merges hold a program for at most one write's
    /// transfer and a stream of rewrites cannot keep it from flash. The merge, if one was made.
    fn merge_into_buffered_page(&mut self, write: &UnitWrite, ready: u64) -> Option<WriteOutcome> {
        if self.engine.as_ref()?.buffered_programs.is_empty() {
            return None;
        }
        let (current, page) = self.own_handle_copy(write)?;
        let e = self.engine.as_ref()?;
        let program = *e.buffered_programs.get(&page)?;
        let waiting_for_data = e.txns[program as usize].not_before_ns;
        if waiting_for_data > e.now_ns && ready > waiting_for_data {
            return None;
        }
        let outcome = self.ftl.merge_into_buffered(write, current);
        let e = self.engine();
        let t = &mut e.txns[program as usize];
        t.not_before_ns = t.not_before_ns.max(ready);
        // Gated, or its arrival at the die still to come: it goes no earlier than `ready` (its
        // release and its arrival event honour `not_before_ns`). Queued: out, and in again
        // once the data is in.
        if t.gates == 0 {
            let (die, q) = (t.die as usize, queue_of(t.kind, t.class));
            let work = &mut e.dies[die];
            if let Some(at) = work.queues[q].iter().position(|&id| id == program) {
                work.queues[q].remove(at);
                work.queued -= 1;
                self.enqueue_at(program, ready);
            }
        }
        Some(outcome)
    }

    /// The plane of the next host unit of `handle`: the one its page is filling in, or, once
    /// that page is full, the plane the allocation policy chooses (by the engine's view of the
    /// dies' load during a run, the timeline's otherwise).
    pub(in crate::host) fn host_plane(&mut self, handle: u32, now_ns: u64) -> u32 {
        let active = self.active_plane[handle as usize];
        // With one unit per page every page is full at once (no call needed to know it).
        if self.unit_shift > 0 && active != NONE && self.ftl.host_page_filling(active, handle) {
            return active;
        }
        let loads = match &self.engine {
            Some(e) => &e.die_load_ns,
            None => self.timeline.die_free_slice(),
        };
        let plane = self.allocator.choose(handle, loads, now_ns);
        self.active_plane[handle as usize] = plane;
        plane
    }

    /// The program of host page `ppa`, created gated (one gate: the page filling) on first use;
    /// kept in the staged map only while `filling` (a page filled by its first unit never goes
    /// there: no map node is allocated and freed per write).
    #[inline(always)]
    fn staged_program(&mut self, ppa: u32, filling: bool) -> u32 {
        if let Some(&p) = self.engine().staged_programs.get(&ppa) {
            return p;
        }
        let t_prog = self.derived.program_ns[self.geo.page_type(ppa) as usize];
        let mut program = self.at_page(txn(TxnKind::Program, TxnClass::HostWrite, t_prog), ppa);
        program.transfers = 1;
        program.gates = 1;
        let block = self.geo.block_of(ppa);
        let e = self.engine();
        program.marks_pending = e.mark_host_program(ppa, block);
        let p = e.new_txn(program);
        e.dies[program.die as usize].queued_work_ns += t_prog;
        if filling {
            e.staged_programs.insert(ppa, p);
        }
        self.program_made_in(p, block);
        p
    }

    /// Count the program of host page `ppa` (page data and OOB over the channel).
    fn count_host_program(&mut self, ppa: u32) {
        let t_prog = self.derived.program_ns[self.geo.page_type(ppa) as usize];
        self.flash.codewords_encoded += self.derived.codewords_per_page as u64;
        self.flash.programs += 1;
        self.flash.oob_writes += 1;
        self.flash.bytes_transferred += self.page_size() as u64;
        self.work.programs += 1;
        self.work.flash_ns += t_prog + self.derived.page_transfer_ns;
        self.work.first_ppa.get_or_insert(ppa);
    }

    /// Request `slot` (a flush, or a FUA write) waits until everything accepted by `start` is
    /// on flash: the staged pages, padded, and the write buffer's pages up to now. Accepted
    /// data is durable at once on a power-loss-protected drive.
    fn engine_make_durable(&mut self, start: u64, slot: u32) {
        if self.config.controller.power_loss_protection {
            return;
        }
        self.engine_flush_staged(start, slot);
        let e = self.engine();
        let watermark = e.buffer_next_id;
        let oldest = e.buffer_outstanding.first().copied().unwrap_or(u64::MAX);
        if oldest < watermark {
            e.request(slot).pending += 1;
            e.flushes.push((watermark, slot));
        }
    }

    /// A flush programs every staged host page, padded; the flush (`slot`) waits for them.
    fn engine_flush_staged(&mut self, start: u64, slot: u32) {
        let mut pages: Vec<u32> = self.engine().staged_programs.keys().copied().collect();
        pages.extend(std::mem::take(&mut self.staged).into_keys());
        pages.sort_unstable();
        pages.dedup();
        for ppa in pages {
            if !self.ftl.pad_page(ppa) {
                continue;
            }
            let p = self.staged_program(ppa, false);
            self.engine().staged_programs.remove(&ppa);
            self.count_host_program(ppa);
            let e = self.engine();
            e.txns[p as usize].request = slot;
            e.request(slot).pending += 1;
            self.release(p, start);
        }
    }
}
