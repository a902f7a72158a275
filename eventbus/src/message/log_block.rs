//! A log's blocks: many cells under one header (see `shared.rs` for headers, cells and the
//! references that point into them), as a log topic keeps its messages (`delivery/log/`).
//!
//! A message's value lives in its cell, with the cell's place in the block and when it was
//! appended (milliseconds since the block was made; seconds, past about 12 days); its seq
//! and topic are the header's. So a kept message costs its value and eight bytes, and the
//! header and the block's own fields are shared by all its cells, where a message of its
//! own cost a header, a pool link and a slot in the ring (BENCHMARKS.md, "A log topic's
//! memory"). Times here are the log's clock's readings, nanoseconds as a `u64`
//! (`delivery/log/clock.rs`): this module works with them and reads no clock.
//! "Under the log's lock" here covers the log's fast append too, which no holder of the
//! lock overlaps (`delivery/log/mod.rs`).
//!
//! # Who lets go of what
//!
//! The log holds one reference to each block it keeps ([`LogBlock`]), counted in the
//! header's `refs` with every reference handed out to a cell of it (a reader's, an
//! observer's, a dead letter's). A count is the block's, not a cell's: while any reference
//! to the block is out, no cell can tell whether it is referred to.
//!
//! - Trimming a cell (the log's trim, which goes front to back) takes its value out to be
//!   dropped when the log's is the block's only reference: then no one can reach the cell
//!   (a reader lending in place never reads behind its position, which the trim never
//!   passes). Otherwise the value stays, and is taken out by a later trim of the same block
//!   that finds the log alone, or when the block's last reference is let go of. A value
//!   with no `Drop` (`mem::needs_drop`) always stays: it holds nothing to let go of.
//! - Trimming a block's last cell lets go of the log's reference. The last reference let go
//!   of drops the values still in the block ([`last_release`]) and frees it.
//!
//! So a reference kept to one message (a dead letter, a clone an observer keeps) keeps its
//! whole block, at most [`CELLS`] messages, until it is let go of: bounded, as the dead
//! letters are.
//!
//! # Out of line
//!
//! A message whose publish ran inline subscribers was made in a block of its own, and one
//! of them may have kept a reference to it: its value cannot move into a cell. Its cell is
//! then marked [`OUT_OF_LINE`] and holds no value; the log keeps the message beside the
//! ring (`delivery/log/mod.rs`), and a reader lending in place takes it from there.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop};
use std::ptr::{self, NonNull};
use std::sync::atomic::{
    fence, AtomicU32, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};

use crate::message::shared::{cells_at, Cell, Header, Kind, Shared};

/// The most cells a log's block has.
pub(crate) const CELLS: u32 = 64;

/// A cell's stamp bit that says its message is kept out of line (see the module docs).
const OUT_OF_LINE: u32 = 1 << 31;

const NANOS_A_MILLI: u64 = 1_000_000;
const NANOS_A_SECOND: u64 = 1_000_000_000;

/// A stamp's bit that says it counts seconds, not milliseconds: a cell appended 2³⁰
/// milliseconds (about 12 days) or more after its block was made is dated to the second.
const SECONDS: u32 = 1 << 30;

/// What a log's block keeps after its cells.
#[repr(C)]
struct Meta {
    /// When the block was made, on the log's clock (nanoseconds, see the module docs): its
    /// cells' stamps count milliseconds from here.
    epoch: u64,
    /// When `stamp` goes stale (its millisecond's end, or its second's past about 12 days):
    /// appends before then take it as it is, without working it out (see `stamp_for`).
    stale_at: u64,
    /// The stamp of the last append. (The fields are in this order so that the `u32`s pack:
    /// 32 bytes a block.)
    stamp: u32,
    /// Cells `0..written` were appended (with a value, or out of line). Written by the log,
    /// under its ring lock; read by the block's last release, after the count's fence.
    written: u32,
    /// Cells `0..dropped` no longer hold a value (taken out by a trim). As `written`.
    dropped: u32,
    /// The first cell appended out of line, [`IN_LINE`] while there is none. Written once,
    /// by the append that marks it, before the log publishes that cell (its tail, with
    /// release); read by a reader lending in place, which may meet appends past its view of
    /// the tail: so atomic, though relaxed is enough (see `first_out_of_line`).
    first_out_of_line: AtomicU32,
}

/// `Meta::first_out_of_line` while every cell appended so far is in line: past every cell.
const IN_LINE: u32 = u32::MAX;

// A block's meta costs its messages half a byte each in a block of 64 cells.
const _: () = assert!(size_of::<Meta>() == 32);

/// The layout of a block of `cells` cells, and where its [`Meta`] is.
fn layout<V>(cells: u32) -> (Layout, usize) {
    let cells_layout = match Layout::array::<Cell<V>>(cells as usize) {
        Ok(layout) => layout,
        Err(_) => handle_alloc_error(Layout::new::<Meta>()),
    };
    let extended = Layout::new::<Header>()
        .extend(cells_layout)
        .and_then(|(with_cells, at)| {
            debug_assert_eq!(at, cells_at::<V>(), "cells where every block has them");
            with_cells.extend(Layout::new::<Meta>())
        });
    match extended {
        Ok((layout, meta)) => {
            debug_assert_eq!(meta, meta_at::<V>(cells), "the meta where `meta_of` looks");
            (layout.pad_to_align(), meta)
        }
        Err(_) => handle_alloc_error(cells_layout),
    }
}

/// A log's own reference to one of its blocks. Dropping it lets go of that reference.
pub(crate) struct LogBlock<V> {
    header: NonNull<Header>,
    _owns: PhantomData<Cell<V>>,
}

// SAFETY: as `Shared<V>`'s: the block gives `&V` to threads that hold references to it, and
// its values are dropped on whichever thread lets go of the last one.
unsafe impl<V: Send + Sync> Send for LogBlock<V> {}
// SAFETY: as above.
unsafe impl<V: Send + Sync> Sync for LogBlock<V> {}

impl<V> LogBlock<V> {
    /// A new block for seqs `base..base + cells` of `topic`, none written yet, counted once:
    /// the log's reference.
    pub(crate) fn new(base: u64, topic: &'static str, cells: u32, epoch: u64) -> Self {
        let (layout, meta) = layout::<V>(cells);
        // SAFETY: the layout has a header, so a non-zero size.
        let start = unsafe { alloc(layout) };
        let Some(start) = NonNull::new(start) else {
            handle_alloc_error(layout)
        };
        // SAFETY: all writes are inside the new allocation, at the offsets its layout gave,
        // each field written once before anything reads it; a cell's value stays
        // uninitialised until it is appended.
        unsafe {
            start.as_ptr().cast::<Header>().write(Header {
                refs: AtomicUsize::new(1),
                base,
                topic,
                kind: Kind::Log,
                cells,
            });
            let first = start.as_ptr().add(cells_at::<V>()).cast::<Cell<V>>();
            for index in 0..cells {
                let cell = first.add(index as usize);
                ptr::addr_of_mut!((*cell).index).write(index);
                ptr::addr_of_mut!((*cell).stamp).write(0);
            }
            start.as_ptr().add(meta).cast::<Meta>().write(Meta {
                epoch,
                stamp: 0,
                stale_at: epoch,
                written: 0,
                dropped: 0,
                first_out_of_line: AtomicU32::new(IN_LINE),
            });
        }
        LogBlock {
            header: start.cast(),
            _owns: PhantomData,
        }
    }

    /// The block's pointer, which [`from_raw`](Self::from_raw) turns back into the log's
    /// reference.
    pub(crate) fn into_raw(self) -> *mut Header {
        ManuallyDrop::new(self).header.as_ptr()
    }

    /// The log's reference again, from [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    ///
    /// `raw` came from `into_raw` and is turned back once.
    pub(crate) unsafe fn from_raw(raw: *mut Header) -> Self {
        LogBlock {
            // SAFETY: the caller's promise: `into_raw` gave a block's pointer.
            header: unsafe { NonNull::new_unchecked(raw) },
            _owns: PhantomData,
        }
    }

    /// The seq of its first cell.
    pub(crate) fn base(&self) -> u64 {
        // SAFETY: the log's reference keeps the block; `base` is written once, at `new`.
        unsafe { self.header.as_ref().base }
    }

    /// How many cells it has.
    pub(crate) fn cells(&self) -> u32 {
        // SAFETY: as in `base`.
        unsafe { self.header.as_ref().cells }
    }

    /// Cell `index`, derived from the block's pointer (a reference made from it may reach
    /// the header: `shared::header_of`).
    fn cell(&self, index: u32) -> *mut Cell<V> {
        debug_assert!(index < self.cells());
        // SAFETY: inside the block: its cells start at `cells_at` and it has `cells` of them.
        unsafe {
            self.header
                .as_ptr()
                .cast::<u8>()
                .add(cells_at::<V>())
                .cast::<Cell<V>>()
                .add(index as usize)
        }
    }

    fn meta(&self) -> *mut Meta {
        // SAFETY: inside the block, where its layout puts the `Meta`.
        unsafe { meta_of::<V>(self.header) }
    }

    /// Appends `value` in cell `index`, at `at`.
    ///
    /// # Safety
    ///
    /// Under the log's lock (one writer); cells `0..index` are appended and `index` is not
    /// (so no reference to it exists).
    #[inline(always)]
    pub(crate) unsafe fn append(&self, index: u32, value: V, at: u64) {
        let cell = self.cell(index);
        // SAFETY: the caller's promise: the cell is this writer's alone until the log
        // publishes it (its tail, with release), and the meta is written under the lock.
        unsafe {
            (*cell).value.get().write(std::mem::MaybeUninit::new(value));
            (*cell).stamp = self.stamp_for(at);
            (*self.meta()).written = index + 1;
        }
    }

    /// Appends cell `index` as kept out of line (see the module docs), at `at`.
    ///
    /// # Safety
    ///
    /// As [`append`](Self::append).
    pub(crate) unsafe fn append_out_of_line(&self, index: u32, at: u64) {
        let cell = self.cell(index);
        // SAFETY: as in `append`.
        unsafe {
            (*cell).stamp = self.stamp_for(at) | OUT_OF_LINE;
            (*self.meta()).written = index + 1;
            let first = &(*self.meta()).first_out_of_line;
            if first.load(Relaxed) == IN_LINE {
                first.store(index, Relaxed);
            }
        }
    }

    /// The stamp of an append at `at`: milliseconds since the block was made.
    ///
    /// # Safety
    ///
    /// Under the log's lock (the meta's cache is written here).
    #[inline(always)]
    unsafe fn stamp_for(&self, at: u64) -> u32 {
        let meta = self.meta();
        // SAFETY: the caller's promise: the meta is the log's under its lock.
        unsafe {
            // Most appends come within the same millisecond as the one before (the coarse
            // clock moves once a tick): one comparison, no division.
            if at < (*meta).stale_at {
                return (*meta).stamp;
            }
            let epoch = (*meta).epoch;
            let since = at.saturating_sub(epoch);
            let (stamp, next) = match u32::try_from(since / NANOS_A_MILLI) {
                Ok(ms) if ms < SECONDS => (ms, (u64::from(ms) + 1) * NANOS_A_MILLI),
                _ => {
                    let secs = (since / NANOS_A_SECOND).min(u64::from(SECONDS - 1));
                    (SECONDS | secs as u32, (secs + 1) * NANOS_A_SECOND)
                }
            };
            (*meta).stamp = stamp;
            (*meta).stale_at = epoch.saturating_add(next);
            stamp
        }
    }

    /// When cell `index` was appended (to the millisecond, rounded down; to the second past
    /// about 12 days after the block was made).
    ///
    /// # Safety
    ///
    /// The cell was appended, and the caller's view of the log publishes that (its lock, or
    /// the tail read with acquire).
    pub(crate) unsafe fn appended_at(&self, index: u32) -> u64 {
        // SAFETY: the caller's promise; `epoch` is written once, at `new`.
        let (stamp, epoch) = unsafe { ((*self.cell(index)).stamp, (*self.meta()).epoch) };
        let stamp = stamp & !OUT_OF_LINE;
        epoch.saturating_add(match stamp & SECONDS {
            0 => u64::from(stamp) * NANOS_A_MILLI,
            _ => u64::from(stamp & !SECONDS) * NANOS_A_SECOND,
        })
    }

    /// The end of the interval its stamp dates cell `index` to: it was appended before this
    /// (a millisecond after [`appended_at`](Self::appended_at), or a second). The age trim
    /// asks this, so that it never drops a message early.
    ///
    /// # Safety
    ///
    /// As [`appended_at`](Self::appended_at).
    pub(crate) unsafe fn appended_before(&self, index: u32) -> u64 {
        // SAFETY: the caller's promise.
        let (at, stamp) = unsafe { (self.appended_at(index), (*self.cell(index)).stamp) };
        at.saturating_add(match stamp & SECONDS {
            0 => NANOS_A_MILLI,
            _ => NANOS_A_SECOND,
        })
    }

    /// Whether cell `index` holds no value, its message kept out of line.
    ///
    /// # Safety
    ///
    /// As [`appended_at`](Self::appended_at).
    pub(crate) unsafe fn is_out_of_line(&self, index: u32) -> bool {
        // SAFETY: the caller's promise.
        unsafe { (*self.cell(index)).stamp & OUT_OF_LINE != 0 }
    }

    /// The block's first cell appended out of line, `u32::MAX` (past every cell) while there
    /// is none: every cell before it is in line, known without looking at each. Cells past
    /// it may be either ([`is_out_of_line`]).
    ///
    /// A reader lending in place asks this once a run of cells, where it looked at every
    /// cell's stamp (BENCHMARKS.md, "A lending worker's copy").
    ///
    /// # Safety
    ///
    /// As [`appended_at`](Self::appended_at), for the cells the caller asks about: the answer
    /// holds for every cell in its view. That view publishes the mark of any of them appended
    /// out of line, written before the cell was published, and the mark is written once, by
    /// the first: so if one of them is out of line, the answer is at or before it. A mark
    /// written since, by an append past the view, is past the view too.
    ///
    /// [`is_out_of_line`]: Self::is_out_of_line
    #[inline(always)]
    pub(crate) unsafe fn first_out_of_line(&self) -> u32 {
        // SAFETY: inside the block, as `meta` says; the field is atomic, and no `&mut` to the
        // meta is ever made (its other fields are written through the pointer).
        unsafe { (*self.meta()).first_out_of_line.load(Relaxed) }
    }

    /// A handle on cell `index`'s message that is not counted (an alias): never
    /// dropped.
    ///
    /// # Safety
    ///
    /// The cell was appended with a value, and the caller uses the handle only while its
    /// value is kept (not trimmed, or held by a counted reference to the block).
    pub(crate) unsafe fn alias(&self, index: u32) -> ManuallyDrop<Shared<V>> {
        // SAFETY: the caller's promise; the cell pointer is derived from the block's.
        ManuallyDrop::new(unsafe { Shared::at(NonNull::new_unchecked(self.cell(index))) })
    }

    /// Trims cells up to `index` (the log's front): takes their values out and hands each
    /// to `keep` (to be dropped once the log's lock is let go of: their `Drop` is user code),
    /// if the log's is the block's only reference (see the module docs). A value with no
    /// `Drop` stays in its cell: taking it out would run nothing and free nothing.
    ///
    /// # Safety
    ///
    /// Under the log's lock; cells `0..=index` were appended, and no uncounted handle on any
    /// of them is used after this (a lending reader's position is past them).
    #[inline(always)]
    pub(crate) unsafe fn trim(&self, index: u32, keep: &mut impl FnMut(V)) {
        if !std::mem::needs_drop::<V>() {
            return;
        }
        // SAFETY: the log's reference keeps the block.
        let refs = unsafe { &self.header.as_ref().refs };
        // Acquire: as the last release's fence; every other reference let go of (each a
        // release read-modify-write) happened before. A count of one is the log's alone,
        // and no new one can appear meanwhile for these cells: references are made from the
        // ring under the log's lock, or from one held.
        if refs.load(Acquire) != 1 {
            return;
        }
        let meta = self.meta();
        // SAFETY: under the lock, the meta is the log's; the cells in `dropped..=index` hold
        // their values (unless out of line) and no one can reach them: each is taken out
        // once, as `dropped` moves past it.
        unsafe {
            let from = (*meta).dropped;
            if from > index {
                return;
            }
            for at in from..=index {
                // Moved past before the value is handed on: were `keep` to unwind, the
                // value taken would not be dropped again by the last release.
                (*meta).dropped = at + 1;
                if !self.is_out_of_line(at) {
                    keep((*self.cell(at)).value.get().read().assume_init());
                }
            }
        }
    }
}

/// Where a block's meta is, from its header.
///
/// # Safety
///
/// `header` is a log block's.
#[inline(always)]
unsafe fn meta_of<V>(header: NonNull<Header>) -> *mut Meta {
    // SAFETY: the caller's promise: a log block has its cell count in its header.
    let cells = unsafe { header.as_ref().cells };
    // SAFETY: inside the block, where its layout puts the meta.
    unsafe {
        header
            .as_ptr()
            .cast::<u8>()
            .add(meta_at::<V>(cells))
            .cast::<Meta>()
    }
}

/// Where the meta of a block of `cells` cells is: after them, aligned (as `layout` has it,
/// in a few instructions: it is asked on every append).
#[inline(always)]
fn meta_at<V>(cells: u32) -> usize {
    let end = cells_at::<V>() + cells as usize * size_of::<Cell<V>>();
    end.next_multiple_of(align_of::<Meta>())
}

impl<V> Drop for LogBlock<V> {
    fn drop(&mut self) {
        // SAFETY: the log's reference keeps the block until this release.
        let refs = unsafe { &self.header.as_ref().refs };
        // As `shared::release`: each reference's uses happen before its release, and the
        // last release sees them all before it drops the values.
        if refs.fetch_sub(1, Release) != 1 {
            return;
        }
        fence(Acquire);
        // SAFETY: the count reached zero: this thread has the block to itself.
        unsafe { last_release::<V>(self.header) };
    }
}

/// What the last reference let go of does with a log's block: drops the values still in it
/// (a panic in a value's `Drop` stops at each), and frees it.
///
/// # Safety
///
/// `header` is a log block's, its count reached zero (after the fence that makes every
/// reference's uses happen before), so this thread has it to itself; not used after.
pub(super) unsafe fn last_release<V>(header: NonNull<Header>) {
    // The block's own handle on it, to read its cells by: never dropped (this is the release).
    let block = ManuallyDrop::new(LogBlock::<V> {
        header,
        _owns: PhantomData,
    });
    // SAFETY: the caller's promise; cells `dropped..written` hold their values unless out of
    // line, each dropped once here.
    unsafe {
        let cells = block.cells();
        let meta = block.meta();
        if std::mem::needs_drop::<V>() {
            for at in (*meta).dropped..(*meta).written {
                if !block.is_out_of_line(at) {
                    let value = (*block.cell(at)).value.get().read().assume_init();
                    crate::util::unwind::drop_quietly(value);
                }
            }
        }
        let (layout, _) = layout::<V>(cells);
        dealloc(header.as_ptr().cast(), layout);
    }
}
