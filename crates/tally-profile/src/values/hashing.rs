//! How a value table turns a value into a slot index: by extracting a few chosen bits of the
//! value (JProfiling's scheme), with BMI2 `pext` where the CPU does it fast, a portable shift
//! table that gives the same index everywhere else, or a multiplicative hash.
//!
//! Bit extraction needs the chosen bits to tell the table's values apart: [`choose_bits`]
//! picks them again whenever a value is added. The multiplicative hash has no bits to choose;
//! [`choose_multiplier`] searches a fixed list of multipliers for one that places the values
//! in distinct slots instead, so it fills tables less fully but costs one multiply.

use std::sync::OnceLock;

/// The largest number of bits a table extracts: 4 bits index 16 slots.
pub const MAX_BITS: usize = 4;

/// Which index function a table uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hashing {
    /// BMI2 `pext` with the chosen bits as its mask (x86-64 only; [`Hashing::fastest`] picks
    /// it only where the CPU has BMI2 and does not microcode it).
    Pext,
    /// The chosen bits gathered one by one with shifts: `pext`'s result in portable code.
    ShiftTable,
    /// `(value × multiplier) >> (64 − bits)`, multiplier chosen per table.
    Multiplicative,
}

impl Hashing {
    /// `pext` when the CPU has it and it is fast, else the shift table (same indices).
    pub fn fastest() -> Hashing {
        if pext_is_fast() {
            Hashing::Pext
        } else {
            Hashing::ShiftTable
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Hashing::Pext => "pext",
            Hashing::ShiftTable => "shift-table",
            Hashing::Multiplicative => "multiplicative",
        }
    }
}

/// The chosen bits of a table in both encodings the index functions read: `pext`'s mask and
/// the shift table's bit positions (ascending, so both give the same index).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BitChoice {
    pub mask: u64,
    pub positions: [u8; MAX_BITS],
    pub count: u8,
}

impl BitChoice {
    pub fn from_mask(mask: u64) -> BitChoice {
        let mut c = BitChoice {
            mask,
            ..BitChoice::default()
        };
        let mut m = mask;
        while m != 0 && (c.count as usize) < MAX_BITS {
            c.positions[c.count as usize] = m.trailing_zeros() as u8;
            c.count += 1;
            m &= m - 1;
        }
        debug_assert_eq!(m, 0, "at most {MAX_BITS} bits");
        c
    }

    /// The shift table's index: bit `positions[i]` of `value` becomes bit `i`.
    #[inline]
    pub fn gather(&self, value: u64) -> usize {
        let mut index = 0;
        for (i, &p) in self.positions[..self.count as usize].iter().enumerate() {
            index |= ((value >> p) & 1) << i;
        }
        index as usize
    }
}

/// `pext(value, mask)` with the BMI2 instruction. Callers check [`has_bmi2`] first.
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn pext_hw(value: u64, mask: u64) -> usize {
    #[target_feature(enable = "bmi2")]
    unsafe fn pext(value: u64, mask: u64) -> u64 {
        core::arch::x86_64::_pext_u64(value, mask)
    }
    debug_assert!(has_bmi2());
    // SAFETY: only reached where the CPU has BMI2 (`Hashing::Pext` is chosen only after
    // `has_bmi2`, and tables built with it check again).
    unsafe { pext(value, mask) as usize }
}

/// Portable stand-in so the code compiles everywhere; never chosen off x86-64.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub fn pext_hw(value: u64, mask: u64) -> usize {
    BitChoice::from_mask(mask).gather(value)
}

pub fn has_bmi2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("bmi2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether `pext` is a fast instruction here: BMI2 present, and not an AMD core before Zen 3
/// (families 0x15–0x18 run `pext` as microcode, hundreds of cycles with a many-bit mask).
/// Decided once from CPUID.
pub fn pext_is_fast() -> bool {
    static FAST: OnceLock<bool> = OnceLock::new();
    *FAST.get_or_init(|| has_bmi2() && !microcoded_pext())
}

#[cfg(target_arch = "x86_64")]
fn microcoded_pext() -> bool {
    use core::arch::x86_64::__cpuid;
    let (vendor, signature) = (__cpuid(0), __cpuid(1));
    let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
    let base_family = (signature.eax >> 8) & 0xf;
    let family = if base_family == 0xf {
        base_family + ((signature.eax >> 20) & 0xff)
    } else {
        base_family
    };
    amd && family < 0x19
}

#[cfg(not(target_arch = "x86_64"))]
fn microcoded_pext() -> bool {
    true
}

/// Bits that give each of `values` (distinct) its own index among `2^max_bits`, as few as
/// possible; `None` if no such choice is found. Greedy first (add the bit that separates the
/// most values), then every combination of the bits the values differ in when greedy fails
/// and there are few such bits.
pub fn choose_bits(values: &[u64], max_bits: usize) -> Option<BitChoice> {
    let max_bits = max_bits.min(MAX_BITS);
    if values.len() <= 1 {
        return Some(BitChoice::default());
    }
    if values.len() > 1 << max_bits {
        return None;
    }
    let differing = values.iter().fold(0u64, |acc, &v| acc | (v ^ values[0]));
    let mut mask = 0u64;
    while (mask.count_ones() as usize) < max_bits {
        let mut best: Option<(usize, u64)> = None;
        let mut rest = differing & !mask;
        while rest != 0 {
            let bit = rest & rest.wrapping_neg();
            rest &= rest - 1;
            let n = distinct_under(values, mask | bit);
            if best.is_none_or(|(m, _)| n > m) {
                best = Some((n, bit));
            }
        }
        let (n, bit) = best?;
        mask |= bit;
        if n == values.len() {
            return Some(BitChoice::from_mask(mask));
        }
    }
    exhaustive(values, differing, max_bits)
}

/// Every combination of up to `max_bits` of the `differing` bits, fewest bits first; only
/// when there are at most 20 of them (4,845 combinations of 4).
fn exhaustive(values: &[u64], differing: u64, max_bits: usize) -> Option<BitChoice> {
    if differing.count_ones() > 20 {
        return None;
    }
    let bits: Vec<u64> = (0..64)
        .map(|i| 1u64 << i)
        .filter(|b| differing & b != 0)
        .collect();
    let need = values.len().next_power_of_two().trailing_zeros() as usize;
    for k in need..=max_bits {
        let mut pick: Vec<usize> = (0..k).collect();
        loop {
            let mask = pick.iter().fold(0u64, |m, &i| m | bits[i]);
            if distinct_under(values, mask) == values.len() {
                return Some(BitChoice::from_mask(mask));
            }
            // Next k-combination of indices into `bits`.
            let Some(i) = (0..k).rev().find(|&i| pick[i] < bits.len() - k + i) else {
                break;
            };
            pick[i] += 1;
            for j in i + 1..k {
                pick[j] = pick[j - 1] + 1;
            }
        }
    }
    None
}

/// How many distinct indices `values` get under `mask`.
fn distinct_under(values: &[u64], mask: u64) -> usize {
    let choice = BitChoice::from_mask(mask);
    let mut seen = 0u32;
    for &v in values {
        seen |= 1 << choice.gather(v);
    }
    seen.count_ones() as usize
}

/// Odd multipliers for the multiplicative hash, tried in order (a SplitMix64 sequence).
pub const MULTIPLIERS: usize = 64;

pub fn multiplier(i: usize) -> u64 {
    let mut z = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}

#[inline]
pub fn multiplicative(value: u64, multiplier: u64, bits: u8) -> usize {
    if bits == 0 {
        0
    } else {
        (value.wrapping_mul(multiplier) >> (64 - u32::from(bits))) as usize
    }
}

/// A multiplier and a bit count (as few bits as possible, at most `max_bits`) that give each
/// of `values` its own index, if one of the [`MULTIPLIERS`] does.
pub fn choose_multiplier(values: &[u64], max_bits: usize) -> Option<(u64, u8)> {
    let max_bits = max_bits.min(MAX_BITS);
    if values.len() <= 1 {
        return Some((multiplier(0), 0));
    }
    let need = values.len().next_power_of_two().trailing_zeros() as usize;
    for bits in need..=max_bits {
        for i in 0..MULTIPLIERS {
            let m = multiplier(i);
            let mut seen = 0u32;
            for &v in values {
                seen |= 1 << multiplicative(v, m, bits as u8);
            }
            if seen.count_ones() as usize == values.len() {
                return Some((m, bits as u8));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    #[test]
    fn the_shift_table_gives_pexts_index_for_any_value_and_mask() {
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..20_000 {
            // A mask of up to four random bits.
            let mut mask = 0u64;
            for _ in 0..(xorshift(&mut x) % 5) {
                mask |= 1 << (xorshift(&mut x) % 64);
            }
            let value = xorshift(&mut x);
            let choice = BitChoice::from_mask(mask);
            let soft = choice.gather(value);
            let reference = (0..64)
                .filter(|b| mask >> b & 1 == 1)
                .enumerate()
                .fold(0usize, |acc, (i, b)| {
                    acc | (((value >> b) & 1) as usize) << i
                });
            assert_eq!(soft, reference, "value {value:#x} mask {mask:#x}");
            if has_bmi2() {
                assert_eq!(
                    pext_hw(value, mask),
                    soft,
                    "value {value:#x} mask {mask:#x}"
                );
            }
        }
    }

    #[test]
    fn chosen_bits_tell_every_value_apart_with_as_few_bits_as_needed() {
        let mut x = 99u64;
        for n in 1..=16usize {
            for _ in 0..50 {
                let mut values: Vec<u64> = Vec::new();
                while values.len() < n {
                    // Object-like values: aligned addresses in one region, or small integers.
                    let v = if n % 2 == 0 {
                        0x7f00_0000_0000 + (xorshift(&mut x) % 4096) * 16
                    } else {
                        xorshift(&mut x) % 1000
                    };
                    if !values.contains(&v) {
                        values.push(v);
                    }
                }
                let Some(c) = choose_bits(&values, MAX_BITS) else {
                    // Any k + 1 values are told apart by k bits: up to 5 always fit.
                    assert!(n > MAX_BITS + 1, "{values:?}");
                    continue;
                };
                let need = n.next_power_of_two().trailing_zeros();
                assert!(u32::from(c.count) >= need && c.count as usize <= MAX_BITS);
                let mut seen = std::collections::HashSet::new();
                assert!(
                    values.iter().all(|&v| seen.insert(c.gather(v))),
                    "{values:?}"
                );
            }
        }
    }

    #[test]
    fn values_that_differ_in_too_few_bits_get_no_choice() {
        // Three values differing only in bit 0 and 1 need 2 bits; allowed 1, none fits.
        assert_eq!(choose_bits(&[0, 1, 2], 1), None);
        assert!(choose_bits(&[0, 1, 2], 2).is_some());
        // More values than slots.
        let many: Vec<u64> = (0..17).collect();
        assert_eq!(choose_bits(&many, MAX_BITS), None);
    }

    #[test]
    fn a_multiplier_places_few_values_in_distinct_slots() {
        let values = [8u64, 16, 24, 32];
        let (m, bits) = choose_multiplier(&values, MAX_BITS).expect("4 values in 16 slots");
        let mut seen = 0u32;
        for v in values {
            seen |= 1 << multiplicative(v, m, bits);
        }
        assert_eq!(seen.count_ones(), 4);
    }

    #[test]
    fn the_fastest_hashing_is_pext_only_where_the_cpu_has_it() {
        let h = Hashing::fastest();
        assert!(h != Hashing::Pext || has_bmi2());
        assert!(h != Hashing::Multiplicative);
    }
}
