//! A cache hierarchy simulator: set-associative levels with LRU replacement, write-back and
//! write-allocate, each level with its own size, line size and associativity.
//!
//! An access is cut into the first level's lines. Each line is looked up level by level: a
//! hit ends the walk; a miss fills the line from the level below (a load there) after the
//! set's least recently used line makes room, a dirty victim being written back to the level
//! below first (a store there; below the last level, to memory). A store marks the line dirty
//! where it lands. Levels are neither inclusive nor exclusive: a line evicted from one level
//! may stay in another.

use std::fmt;

/// Whether an access reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    Load,
    Store,
}

/// One level's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LevelConfig {
    pub name: String,
    pub size_bytes: u64,
    pub line_bytes: u64,
    pub ways: u32,
}

impl LevelConfig {
    fn sets(&self) -> u64 {
        self.size_bytes / (self.line_bytes * u64::from(self.ways))
    }
}

impl fmt::Display for LevelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} bytes, {}-byte lines, {}-way",
            self.name, self.size_bytes, self.line_bytes, self.ways
        )
    }
}

/// Why a hierarchy cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    #[error("a cache needs at least one level")]
    NoLevels,
    #[error("{level}: the line size must be a power of two (is {line_bytes})")]
    LineSize { level: String, line_bytes: u64 },
    #[error("{level}: the associativity must be at least 1")]
    Ways { level: String },
    #[error(
        "{level}: the size ({size_bytes} bytes) must be the line size times the ways times a \
         power-of-two number of sets"
    )]
    Size { level: String, size_bytes: u64 },
    #[error("`{0}` is not a cache level: expected NAME:SIZE:LINE:WAYS, e.g. L1:32K:64:8")]
    Spec(String),
}

/// What happened at one level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Line lookups: the accesses that reached this level, fills from the level above
    /// included, and write-backs from it.
    pub accesses: u64,
    pub misses: u64,
    /// Dirty lines this level evicted and wrote to the level below (or memory).
    pub writebacks: u64,
}

struct Level {
    config: LevelConfig,
    line_shift: u32,
    set_mask: u64,
    ways: usize,
    /// `sets × ways` entries: the line address (address >> line_shift) or `EMPTY`.
    lines: Vec<u64>,
    /// When each entry was last touched, for LRU.
    stamps: Vec<u64>,
    dirty: Vec<bool>,
    stats: LevelStats,
}

const EMPTY: u64 = u64::MAX;

impl Level {
    fn new(config: LevelConfig) -> Result<Level, CacheError> {
        let level = config.name.clone();
        if !config.line_bytes.is_power_of_two() {
            return Err(CacheError::LineSize {
                level,
                line_bytes: config.line_bytes,
            });
        }
        if config.ways == 0 {
            return Err(CacheError::Ways { level });
        }
        let sets = config.sets();
        if sets == 0
            || !sets.is_power_of_two()
            || sets * config.line_bytes * u64::from(config.ways) != config.size_bytes
        {
            return Err(CacheError::Size {
                level,
                size_bytes: config.size_bytes,
            });
        }
        let entries = (sets * u64::from(config.ways)) as usize;
        Ok(Level {
            line_shift: config.line_bytes.trailing_zeros(),
            set_mask: sets - 1,
            ways: config.ways as usize,
            lines: vec![EMPTY; entries],
            stamps: vec![0; entries],
            dirty: vec![false; entries],
            stats: LevelStats::default(),
            config,
        })
    }
}

/// A cache hierarchy, first level first.
pub struct Hierarchy {
    levels: Vec<Level>,
    clock: u64,
    /// Dirty lines the last level wrote to memory.
    memory_writebacks: u64,
}

impl Hierarchy {
    pub fn new(levels: Vec<LevelConfig>) -> Result<Hierarchy, CacheError> {
        if levels.is_empty() {
            return Err(CacheError::NoLevels);
        }
        Ok(Hierarchy {
            levels: levels
                .into_iter()
                .map(Level::new)
                .collect::<Result<_, _>>()?,
            clock: 0,
            memory_writebacks: 0,
        })
    }

    /// The levels' shapes.
    pub fn configs(&self) -> impl Iterator<Item = &LevelConfig> {
        self.levels.iter().map(|l| &l.config)
    }

    /// One access of `size` bytes (at least 1) at `address`. Answers how deep the access
    /// had to go: 0 when every line it touched hit in the first level, `k` when some line
    /// missed in levels `0..k` and hit in level `k`, the number of levels when one came from
    /// memory.
    pub fn access(&mut self, address: u64, size: u32, kind: AccessKind) -> usize {
        let shift = self.levels[0].line_shift;
        let first = address >> shift;
        let last = (address + u64::from(size.max(1)) - 1) >> shift;
        let mut depth = 0;
        for line in first..=last {
            depth = depth.max(self.touch(0, line << shift, kind));
        }
        depth
    }

    /// Statistics per level, first level first.
    pub fn stats(&self) -> Vec<LevelStats> {
        self.levels.iter().map(|l| l.stats).collect()
    }

    /// Dirty lines written back to memory by the last level.
    pub fn memory_writebacks(&self) -> u64 {
        self.memory_writebacks
    }

    /// Looks the line at byte `address` up in level `i` and below; answers the level that had
    /// it (the number of levels: memory).
    fn touch(&mut self, i: usize, address: u64, kind: AccessKind) -> usize {
        if i == self.levels.len() {
            if kind == AccessKind::Store {
                self.memory_writebacks += 1;
            }
            return i;
        }
        self.clock += 1;
        let clock = self.clock;
        let level = &mut self.levels[i];
        level.stats.accesses += 1;
        let line = address >> level.line_shift;
        let base = (line & level.set_mask) as usize * level.ways;
        let set = base..base + level.ways;
        if let Some(w) = level.lines[set.clone()].iter().position(|&l| l == line) {
            let e = base + w;
            level.stamps[e] = clock;
            level.dirty[e] |= kind == AccessKind::Store;
            return i;
        }
        level.stats.misses += 1;
        // The victim: an empty way, else the least recently used.
        let victim = set
            .clone()
            .min_by_key(|&e| {
                if level.lines[e] == EMPTY {
                    0
                } else {
                    level.stamps[e]
                }
            })
            .expect("a set has at least one way");
        let evicted = (level.lines[victim] != EMPTY && level.dirty[victim])
            .then(|| level.lines[victim] << level.line_shift);
        level.lines[victim] = line;
        level.stamps[victim] = clock;
        level.dirty[victim] = kind == AccessKind::Store;
        if let Some(old) = evicted {
            self.levels[i].stats.writebacks += 1;
            self.touch(i + 1, old, AccessKind::Store);
        }
        self.touch(i + 1, address, AccessKind::Load)
    }
}

/// Reads `NAME:SIZE:LINE:WAYS[,…]` (sizes in bytes, or with K, M, G), e.g.
/// `L1:32K:64:8,L2:1M:64:16`.
pub fn parse_levels(spec: &str) -> Result<Vec<LevelConfig>, CacheError> {
    spec.split(',')
        .map(|level| {
            let bad = || CacheError::Spec(level.to_string());
            let parts: Vec<&str> = level.trim().split(':').collect();
            let [name, size, line, ways] = parts[..] else {
                return Err(bad());
            };
            Ok(LevelConfig {
                name: name.to_string(),
                size_bytes: parse_bytes(size).ok_or_else(bad)?,
                line_bytes: parse_bytes(line).ok_or_else(bad)?,
                ways: ways.parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

fn parse_bytes(s: &str) -> Option<u64> {
    let (digits, unit) = match s.char_indices().last()? {
        (i, 'K' | 'k') => (&s[..i], 1 << 10),
        (i, 'M' | 'm') => (&s[..i], 1 << 20),
        (i, 'G' | 'g') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use AccessKind::{Load, Store};

    fn level(name: &str, size: u64, line: u64, ways: u32) -> LevelConfig {
        LevelConfig {
            name: name.into(),
            size_bytes: size,
            line_bytes: line,
            ways,
        }
    }

    /// L1: direct-mapped, 2 sets of one 16-byte line; L2: one set of two 16-byte lines.
    fn tiny() -> Hierarchy {
        Hierarchy::new(vec![level("L1", 32, 16, 1), level("L2", 32, 16, 2)]).unwrap()
    }

    #[test]
    fn a_small_trace_misses_where_worked_out_by_hand() {
        let mut c = tiny();
        // 1. Line 0x00 into L1 set 0 and L2, from memory.
        assert_eq!(c.access(0x00, 8, Load), 2);
        // 2. The same line: an L1 hit.
        assert_eq!(c.access(0x04, 4, Load), 0);
        // 3. Line 0x10 (set 1) stored: allocated dirty in L1, filled from memory into L2.
        assert_eq!(c.access(0x10, 8, Store), 2);
        // 4. Line 0x20 (set 0) evicts the clean 0x00 from L1; L2 evicts its LRU, 0x00.
        assert_eq!(c.access(0x20, 8, Load), 2);
        // 5. Line 0x30 (set 1) evicts the dirty 0x10 from L1: written back to L2 (a hit,
        //    now dirty there), then 0x30 is filled, evicting L2's LRU, 0x20.
        assert_eq!(c.access(0x30, 8, Load), 2);
        // 6. Line 0x00 again (set 0, holding 0x20): L2 holds 0x10 (dirty) and 0x30; it
        //    evicts 0x10, the older, to memory.
        assert_eq!(c.access(0x00, 8, Load), 2);
        // 7. Line 0x30, in L1 set 1 still.
        assert_eq!(c.access(0x34, 4, Store), 0);
        let s = c.stats();
        assert_eq!(
            s[0],
            LevelStats {
                accesses: 7,
                misses: 5,
                writebacks: 1
            }
        );
        // Five fills and one write-back reached L2; the write-back hit.
        assert_eq!(
            s[1],
            LevelStats {
                accesses: 6,
                misses: 5,
                writebacks: 1
            }
        );
        assert_eq!(c.memory_writebacks(), 1);
    }

    #[test]
    fn an_access_across_a_line_boundary_touches_both_lines() {
        let mut c = tiny();
        assert_eq!(c.access(0x0c, 8, Load), 2);
        assert_eq!(c.stats()[0].accesses, 2);
        assert_eq!(c.stats()[0].misses, 2);
        // Both lines are now in L1 (sets 0 and 1).
        assert_eq!(c.access(0x00, 1, Load), 0);
        assert_eq!(c.access(0x1f, 1, Load), 0);
    }

    #[test]
    fn lru_keeps_the_recently_used_line_of_a_set() {
        // One set of two ways: a, b, a, c evicts b, not a.
        let mut c = Hierarchy::new(vec![level("L1", 128, 64, 2)]).unwrap();
        c.access(0, 8, Load);
        c.access(64, 8, Load);
        c.access(0, 8, Load);
        c.access(128, 8, Load);
        assert_eq!(c.access(0, 8, Load), 0, "a stays");
        assert_eq!(c.access(64, 8, Load), 1, "b was evicted");
    }

    #[test]
    fn shapes_that_are_not_caches_are_refused() {
        assert_eq!(Hierarchy::new(vec![]).err(), Some(CacheError::NoLevels));
        assert!(matches!(
            Hierarchy::new(vec![level("L1", 96, 48, 1)]).err(),
            Some(CacheError::LineSize { .. })
        ));
        assert!(matches!(
            Hierarchy::new(vec![level("L1", 96, 32, 1)]).err(),
            Some(CacheError::Size { .. })
        ));
        assert!(matches!(
            Hierarchy::new(vec![level("L1", 64, 32, 0)]).err(),
            Some(CacheError::Ways { .. })
        ));
    }

    #[test]
    fn level_specs_are_read() {
        assert_eq!(
            parse_levels("L1:32K:64:8,L2:1M:64:16").unwrap(),
            vec![level("L1", 32 << 10, 64, 8), level("L2", 1 << 20, 64, 16)]
        );
        assert!(matches!(
            parse_levels("L1:32K:64"),
            Err(CacheError::Spec(_))
        ));
        assert!(matches!(
            parse_levels("L1:lots:64:8"),
            Err(CacheError::Spec(_))
        ));
    }
}
