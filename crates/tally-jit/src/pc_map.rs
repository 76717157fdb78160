//! The pc map of a compiled function: machine-code offset → the packed location (inline scope
//! and bytecode index) of the instruction that code runs for.
//!
//! The translator gives every IR instruction it makes a location, but not all machine code
//! comes from those: Cranelift's optimizer rematerializes constants (an address, a tag mask)
//! next to their uses without a location, the register allocator adds moves and spills, and
//! lowering adds the blocks of split edges (moves and a jump). A sample on such code is time
//! spent for a nearby bytecode, so — as perf and async-profiler charge a call's overhead to
//! the call site — this map places it on the bytecode it serves, within its machine block:
//! - the next located instruction of its block (a constant or a reload comes before its use);
//! - otherwise the last located one before it in the block (moves and the jump that end it);
//! - a block with no located instruction (an edge's moves and jump, which lowering places
//!   right after the block the edge leaves; a loop head whose reloads and branch Cranelift
//!   emits without a location) takes the last location before it in the code.
//!
//! What is left on no bytecode is the function's entry block (prologue, the resume dispatch)
//! and the code the lowering marks [`SHARED_EXIT`] (the optimizing tier's hand-over: code
//! that runs for every bytecode that leaves). Cranelift's edges between machine blocks are
//! not used to tell an edge block from an exit: after branch threading they can name a block
//! that was folded away, or leave a block out.

/// The source location of code that runs for no one bytecode: the shared exits. The pc map
/// leaves it on no bytecode, and does not place it on its neighbours' either.
pub(crate) const SHARED_EXIT: u32 = u32::MAX - 1;

/// A stretch of machine code `[start, end)` and its location (`None`: the translator's
/// instructions gave it none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub start: u32,
    pub end: u32,
    pub loc: Option<u32>,
}

/// The map as `(start offset, location)` entries, sorted, each up to the next: `segments`
/// are Cranelift's source-location ranges in order (gaps between them are code without one),
/// `block_starts` the machine blocks' start offsets, `size` the code's length.
pub(crate) fn pc_map(
    segments: &[Segment],
    block_starts: &[u32],
    size: u32,
) -> Vec<(u32, Option<u32>)> {
    let pieces = cut_at_blocks(&fill_gaps(segments, size), block_starts);
    let real = |loc: Option<u32>| loc.filter(|&l| l != SHARED_EXIT);
    let mut map: Vec<(u32, Option<u32>)> = Vec::with_capacity(pieces.len() + 1);
    let mut last_before: Option<u32> = None;
    for (start, range) in group_by_block(&pieces, block_starts) {
        let block = &pieces[range];
        let own = block.iter().any(|p| p.loc.is_some());
        for (k, p) in block.iter().enumerate() {
            let loc = match p.loc {
                Some(l) => real(Some(l)),
                None if own => {
                    let next = block[k + 1..].iter().find_map(|q| real(q.loc));
                    next.or_else(|| block[..k].iter().rev().find_map(|q| real(q.loc)))
                }
                None if start == 0 => None,
                None => last_before,
            };
            map.push((p.start, loc));
        }
        last_before = block.iter().rev().find_map(|p| real(p.loc)).or(last_before);
    }
    map.push((size, None));
    map.dedup_by(|later, earlier| later.1 == earlier.1);
    map
}

/// `segments` with the gaps between them (and before the first, after the last up to `size`)
/// as segments without a location.
fn fill_gaps(segments: &[Segment], size: u32) -> Vec<Segment> {
    let mut out = Vec::with_capacity(segments.len() * 2 + 1);
    let mut end = 0;
    for s in segments {
        if s.start > end {
            out.push(Segment {
                start: end,
                end: s.start,
                loc: None,
            });
        }
        out.push(*s);
        end = end.max(s.end);
    }
    if size > end {
        out.push(Segment {
            start: end,
            end: size,
            loc: None,
        });
    }
    out
}

/// Splits every segment that spans a block start there (`block_starts` sorted: each
/// segment looks up only the starts inside it, so a large function costs no product of
/// its segments and blocks).
fn cut_at_blocks(segments: &[Segment], block_starts: &[u32]) -> Vec<Segment> {
    let mut out = Vec::with_capacity(segments.len() + block_starts.len());
    for s in segments {
        let mut start = s.start;
        let first = block_starts.partition_point(|&b| b <= s.start);
        for &b in block_starts[first..].iter().take_while(|&&b| b < s.end) {
            out.push(Segment {
                start,
                end: b,
                loc: s.loc,
            });
            start = b;
        }
        out.push(Segment { start, ..*s });
    }
    out
}

/// The pieces of each block: (block start, index range into `pieces`); code before the first
/// block start is a block of its own at 0.
fn group_by_block(pieces: &[Segment], block_starts: &[u32]) -> Vec<(u32, std::ops::Range<usize>)> {
    let block_of = |pc: u32| {
        let i = block_starts.partition_point(|&b| b <= pc);
        i.checked_sub(1).map_or(0, |i| block_starts[i])
    };
    let mut blocks: Vec<(u32, std::ops::Range<usize>)> = Vec::new();
    for (k, p) in pieces.iter().enumerate() {
        let b = block_of(p.start);
        match blocks.last_mut() {
            Some((start, range)) if *start == b => range.end = k + 1,
            _ => blocks.push((b, k..k + 1)),
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(start: u32, end: u32, loc: Option<u32>) -> Segment {
        Segment { start, end, loc }
    }

    #[test]
    fn a_constant_before_its_use_takes_the_use_and_moves_after_an_instruction_take_it() {
        // block at 0: prologue (no location); block at 10: a constant (no location), the
        // instruction @5 that uses it, then moves (a gap) and a jump without a location.
        let segments = [
            seg(0, 10, None),
            seg(10, 20, None),
            seg(20, 30, Some(5)),
            seg(34, 39, None),
        ];
        let map = pc_map(&segments, &[0, 10], 39);
        assert_eq!(map, vec![(0, None), (10, Some(5)), (39, None)]);
    }

    #[test]
    fn an_edge_block_takes_the_branch_it_leaves_from_and_a_shared_exit_stays_unplaced() {
        // block 0 ends with the branch @7; block 20 (moves and a jump) is reached only from
        // it; block 30 is the shared exit (its move without a location); block 40 runs @9.
        let segments = [
            seg(0, 5, None),
            seg(5, 20, Some(7)),
            seg(20, 30, None),
            seg(30, 32, None),
            seg(32, 40, Some(SHARED_EXIT)),
            seg(40, 50, Some(9)),
        ];
        let map = pc_map(&segments, &[0, 20, 30, 40], 50);
        assert_eq!(
            map,
            vec![(0, Some(7)), (30, None), (40, Some(9)), (50, None)]
        );
    }

    #[test]
    fn an_edge_block_follows_the_code_before_it() {
        // Block 10 (a jump without a location) comes right after block 0 (@3).
        let segments = [seg(0, 10, Some(3)), seg(10, 15, None), seg(15, 20, Some(4))];
        let map = pc_map(&segments, &[0, 10, 15], 20);
        assert_eq!(map, vec![(0, Some(3)), (15, Some(4)), (20, None)]);
    }

    #[test]
    fn a_loop_head_without_locations_takes_the_code_before_it() {
        // Block 20 (reloads, a compare and branch, all without a location: a loop head as
        // Cranelift may emit it) follows block 10 (@8, ending in a return).
        let segments = [
            seg(0, 10, Some(0)),
            seg(10, 20, Some(8)),
            seg(20, 30, None),
            seg(30, 40, Some(9)),
        ];
        let map = pc_map(&segments, &[0, 10, 20, 30], 40);
        assert_eq!(
            map,
            vec![(0, Some(0)), (10, Some(8)), (30, Some(9)), (40, None)]
        );
    }

    #[test]
    fn without_block_information_unplaced_code_takes_its_neighbours() {
        let segments = [seg(0, 4, None), seg(4, 8, Some(1)), seg(12, 16, Some(2))];
        let map = pc_map(&segments, &[], 20);
        assert_eq!(map, vec![(0, Some(1)), (8, Some(2)), (20, None)]);
    }

    #[test]
    fn a_located_range_across_a_block_start_is_cut_there() {
        let segments = [seg(0, 10, Some(1)), seg(10, 12, None)];
        let map = pc_map(&segments, &[0, 6], 12);
        assert_eq!(map, vec![(0, Some(1)), (12, None)]);
    }
}
