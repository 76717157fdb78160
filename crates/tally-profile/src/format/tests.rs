use super::*;
use crate::fixtures::example_profile;
use crate::profile::Profile;
use crate::sample::Sample;

fn patch_crc(bytes: &mut [u8], chunk_start: usize) {
    let len =
        u32::from_le_bytes(bytes[chunk_start + 4..chunk_start + 8].try_into().unwrap()) as usize;
    let end = chunk_start + 8 + len;
    let crc = crc32fast::hash(&bytes[chunk_start..end]);
    bytes[end..end + 4].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn round_trips_in_memory_and_on_disk() {
    let p = example_profile();
    let bytes = encode(&p);
    assert_eq!(decode(&bytes).unwrap(), p);

    let dir = std::env::temp_dir().join(format!("tally-profile-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.tprof");
    std::fs::write(&path, b"old contents").unwrap();
    p.write_file(&path, tally_output::IfExists::Replace)
        .unwrap();
    assert_eq!(Profile::read(&path).unwrap(), p);
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "the temporary file was renamed away");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_empty_profile_round_trips() {
    let p = Profile::default();
    assert_eq!(decode(&encode(&p)).unwrap(), p);
}

#[test]
fn many_samples_span_several_chunks() {
    let mut p = example_profile();
    let s = p.samples[0].clone();
    p.samples = (0..SAMPLES_PER_CHUNK as u64 * 2 + 5)
        .map(|k| crate::sample::Sample {
            time_ns: s.time_ns + k,
            ..s.clone()
        })
        .collect();
    assert_eq!(decode(&encode(&p)).unwrap(), p);
}

#[test]
fn every_truncation_is_rejected_as_truncated() {
    let bytes = encode(&example_profile());
    for len in 1..bytes.len() {
        match decode(&bytes[..len]) {
            Err(ReadError::Truncated { .. } | ReadError::MissingEnd) => {}
            other => panic!("prefix of {len} bytes: {other:?}"),
        }
    }
    assert!(matches!(decode(&[]), Err(ReadError::NotAProfile)));
}

#[test]
fn a_flipped_bit_is_a_checksum_error_naming_the_chunk() {
    let bytes = encode(&example_profile());
    // Flip one bit in every byte after the file header in turn.
    let mut seen_checksum = 0;
    for at in 12..bytes.len() {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        match decode(&b) {
            Err(ReadError::Checksum { tag, offset }) => {
                assert!(offset as usize <= at);
                assert_eq!(tag.len(), 4);
                seen_checksum += 1;
            }
            // A flipped length field moves the chunk end: truncation, or a
            // checksum read from the wrong place.
            Err(ReadError::Truncated { .. }) => {}
            Err(e) if at < 20 => panic!("byte {at}: {e}"),
            Err(_) => {}
            Ok(_) => panic!("flipping byte {at} went unnoticed"),
        }
    }
    assert!(seen_checksum > bytes.len() / 2);
    let mut b = bytes.clone();
    b[14] ^= 1; // inside HEAD's length
    assert!(decode(&b).is_err());
    let msg = {
        let mut b = bytes.clone();
        b[30] ^= 1;
        decode(&b).unwrap_err().to_string()
    };
    assert!(
        msg.contains("checksum mismatch in chunk HEAD at byte 12"),
        "{msg}"
    );
}

#[test]
fn wrong_versions_and_magic_are_named() {
    let mut b = encode(&example_profile());
    b[8] = 2;
    let e = decode(&b).unwrap_err();
    assert!(matches!(
        e,
        ReadError::UnsupportedVersion {
            major: 2,
            minor: MINOR
        }
    ));
    assert_eq!(
        e.to_string(),
        format!("unsupported profile format version 2.{MINOR} (this reader reads 1.x)")
    );
    let mut b = encode(&example_profile());
    b[0] = b'X';
    assert_eq!(
        decode(&b).unwrap_err().to_string(),
        "not a Tally profile (bad magic number)"
    );
}

/// Splices a chunk in before END! and fixes END!'s count.
fn with_extra_chunk(tag: &[u8; 4], payload: &[u8]) -> Vec<u8> {
    let p = example_profile();
    let bytes = encode(&p);
    // END! is the last chunk: tag + len + 1-byte payload + crc.
    let end_at = bytes.len() - 13;
    assert_eq!(&bytes[end_at..end_at + 4], b"END!");
    let count = bytes[end_at + 8];
    let mut out = bytes[..end_at].to_vec();
    let start = out.len();
    out.extend_from_slice(tag);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&[0; 4]);
    patch_crc(&mut out, start);
    let end = out.len();
    out.extend_from_slice(b"END!");
    out.extend_from_slice(&1u32.to_le_bytes());
    out.push(count + 1);
    out.extend_from_slice(&[0; 4]);
    patch_crc(&mut out, end);
    out
}

#[test]
fn unknown_chunks_are_skipped_only_when_ancillary() {
    let p = decode(&with_extra_chunk(b"note", b"anything")).unwrap();
    assert_eq!(p, example_profile());
    let e = decode(&with_extra_chunk(b"NOTE", b"anything")).unwrap_err();
    assert!(
        matches!(e, ReadError::UnknownChunk { ref tag, .. } if tag == "NOTE"),
        "{e}"
    );
}

#[test]
fn bad_payloads_say_what_is_wrong() {
    // A sample with VM state 9.
    let mut payload = vec![1u8, 0, 9, 0, 0, 0, 0];
    let e = decode(&with_extra_chunk(b"SMPL", &payload)).unwrap_err();
    assert!(e.to_string().contains("unknown VM state 9"), "{e}");
    payload[2] = 0;
    payload.push(7);
    let e = decode(&with_extra_chunk(b"SMPL", &payload)).unwrap_err();
    assert!(e.to_string().contains("unexpected bytes"), "{e}");
    let e = decode(&with_extra_chunk(b"EXCT", &[0, 0, 0])).unwrap_err();
    assert!(e.to_string().contains("second EXCT"), "{e}");
}

#[test]
fn trailing_bytes_and_a_wrong_chunk_count_are_rejected() {
    let mut b = encode(&example_profile());
    b.push(0);
    assert!(matches!(
        decode(&b),
        Err(ReadError::TrailingData { extra: 1 })
    ));
    let mut b = encode(&example_profile());
    let end_at = b.len() - 13;
    b[end_at + 8] += 1;
    patch_crc(&mut b, end_at);
    let e = decode(&b).unwrap_err();
    assert!(e.to_string().contains("end marker counts"), "{e}");
}

/// Where chunk `tag` starts in an encoded profile.
fn chunk_at(bytes: &[u8], tag: &[u8; 4]) -> usize {
    let mut at = 12; // magic, major, minor
    while &bytes[at..at + 4] != tag {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 8 + len + 4;
    }
    at
}

/// `p` encoded as a writer of format 1.`minor` wrote it: `CNTR` without its last `cut`
/// fields (one byte each in the example profile).
fn as_older_format(p: &Profile, minor: u16, cut: usize) -> Vec<u8> {
    let mut b = encode(p);
    b[10..12].copy_from_slice(&minor.to_le_bytes());
    let at = chunk_at(&b, b"CNTR");
    let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
    for i in 0..cut {
        let last = b.remove(at + 8 + len - 1 - i);
        assert!(last < 0x80, "a one-byte field");
    }
    b[at + 4..at + 8].copy_from_slice(&((len - cut) as u32).to_le_bytes());
    patch_crc(&mut b, at);
    b
}

#[test]
fn a_format_1_0_file_reads_with_no_merged_ticks() {
    let p = example_profile();
    assert_eq!((p.counters.ticks_merged, p.counters.dropped_slow), (2, 1));
    let b = encode(&p);
    let at = chunk_at(&b, b"CNTR");
    let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
    assert_eq!(
        b[at + 8 + len - 2..at + 8 + len],
        [2, 1],
        "CNTR's last fields"
    );
    let old = decode(&as_older_format(&p, 0, 2)).unwrap();
    assert_eq!(
        (old.counters.ticks_merged, old.counters.dropped_slow),
        (0, 0)
    );
    assert_eq!(old.counters.cbs_ticks, p.counters.cbs_ticks);
    assert_eq!(old.samples, p.samples);
}

#[test]
fn a_format_1_9_file_reads_with_no_samples_dropped_for_pacing() {
    let p = example_profile();
    let old = decode(&as_older_format(&p, 9, 1)).unwrap();
    assert_eq!(old.counters.dropped_slow, 0);
    assert_eq!(old.counters.ticks_merged, p.counters.ticks_merged);
    assert_eq!(old.samples, p.samples);
}

/// Writes `p` the way a run does: header first, events and samples in several appends.
fn streamed(p: &Profile, dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    let path = dir.join("run.profile");
    let mut w = StreamWriter::create(&path, &p.header, tally_output::IfExists::Replace).unwrap();
    let half = p.samples.len() / 2;
    w.append(&p.events[..1], &p.samples[..half]).unwrap();
    w.append(&p.events[1..], &p.samples[half..]).unwrap();
    let partial = std::fs::read(w.partial()).unwrap();
    w.finish(p).map_err(|f| f.0).unwrap();
    (path, partial)
}

#[test]
fn a_streamed_file_reads_back_whole_and_its_partial_file_up_to_the_cut() {
    let p = example_profile();
    let dir = std::env::temp_dir().join(format!("tally-profile-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("run.profile"), b"the old profile").unwrap();
    let (path, partial) = streamed(&p, &dir);
    assert_eq!(Profile::read(&path).unwrap(), p);
    assert!(partials_of(&path).is_empty(), "renamed when complete");
    // The partial file, as a kill -9 before the end leaves it.
    assert!(matches!(decode(&partial), Err(ReadError::MissingEnd)));
    let r = decode_partial(&partial).unwrap();
    let cut = r.cut.expect("a cut");
    assert_eq!((cut.at_byte, cut.lost_bytes), (partial.len() as u64, 0));
    assert_eq!(r.profile.samples, p.samples);
    assert_eq!(r.profile.events, p.events);
    assert!(cut.to_string().contains("counters are missing"), "{cut}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_cut_at_random_points_reads_up_to_its_last_chunk_and_never_panics() {
    let mut p = example_profile();
    let s = p.samples[0].clone();
    p.samples = (0..3000u64)
        .map(|i| Sample {
            time_ns: s.time_ns + i,
            ..s.clone()
        })
        .collect();
    let full = encode(&p);
    let head_end = 12 + 8 + u32::from_le_bytes(full[16..20].try_into().unwrap()) as usize + 4;
    // A fixed-seed xorshift: ten cut points spread over the file, reproducibly.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..10 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = (x % full.len() as u64) as usize;
        let bytes = &full[..at];
        assert!(decode(bytes).is_err(), "cut at {at}");
        match decode_partial(bytes) {
            Ok(r) => {
                assert!(at >= head_end, "cut at {at} inside the header was accepted");
                let cut = r.cut.expect("a cut file says so");
                assert_eq!(cut.at_byte + cut.lost_bytes, at as u64);
                assert!(r.profile.samples.len() <= p.samples.len());
                assert_eq!(r.profile.samples[..], p.samples[..r.profile.samples.len()]);
                crate::fuzz_support::analyse(&r.profile);
            }
            Err(e) => assert!(at < head_end, "cut at {at}: {e}"),
        }
    }
}

#[test]
fn a_checksum_failure_before_the_cut_still_rejects_the_file() {
    let p = example_profile();
    let mut bytes = encode(&p);
    let smpl = chunk_at(&bytes, b"SMPL");
    bytes[smpl + 9] ^= 0x40;
    bytes.truncate(bytes.len() - 3);
    let err = decode_partial(&bytes).unwrap_err();
    assert!(matches!(err, ReadError::Checksum { .. }), "{err}");
}

#[test]
fn a_collection_end_from_before_1_9_reads_as_a_full_collection_of_an_unrecorded_plan() {
    let p = example_profile();
    let gc = p
        .events
        .iter()
        .position(|e| matches!(e.kind, crate::event::EventKind::GcEnd { .. }))
        .expect("the example has a collection");
    let mut b = encode(&p);
    // Rewrite the event the way a 1.8 writer wrote it: the old tag, no plan and no scope.
    b[10..12].copy_from_slice(&8u16.to_le_bytes());
    let at = chunk_at(&b, b"EVNT");
    let new_form = [
        &[event_tags::GC_END_SCOPED, 10][..],
        b"Allocation",
        &[8],
        b"genimmix",
        &[7],
        b"nursery",
    ]
    .concat();
    let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
    let payload = &b[at + 8..at + 8 + len];
    let found = payload
        .windows(new_form.len())
        .position(|w| w == new_form.as_slice())
        .expect("the scoped GC end event");
    let old_form = [&[event_tags::GC_END, 10][..], b"Allocation"].concat();
    let start = at + 8 + found;
    b.splice(start..start + new_form.len(), old_form.iter().copied());
    let new_len = len - (new_form.len() - old_form.len());
    b[at + 4..at + 8].copy_from_slice(&(new_len as u32).to_le_bytes());
    patch_crc(&mut b, at);
    let old = decode(&b).unwrap();
    match &old.events[gc].kind {
        crate::event::EventKind::GcEnd {
            kind, plan, scope, ..
        } => {
            assert_eq!(
                (kind.as_str(), plan.as_str(), scope.as_str()),
                ("Allocation", "", "full")
            );
        }
        other => panic!("expected the GC end, got {other:?}"),
    }
    assert_eq!(old.samples, p.samples);
}

/// Found by the fuzzer: a CBS sample count whose edges are all gone was dropped on writing.
#[test]
fn a_cbs_sample_count_without_edges_round_trips() {
    let p = Profile {
        cbs_samples: 20,
        ..Profile::default()
    };
    assert_eq!(decode(&encode(&p)).unwrap(), p);
}

#[test]
fn call_counts_round_trip_with_their_back_edges_and_without() {
    let counts = |loops: Option<u64>| crate::event::Event {
        time_ns: 7,
        kind: crate::event::EventKind::TierCallCounts {
            counts: vec![crate::event::TierCalls {
                method: crate::ids::MethodId(3),
                tier: crate::ids::Tier::Baseline,
                calls: 12,
                loops,
            }],
            instrumentation_ns: 40,
        },
    };
    // Counts read from a file before 1.11 have no back-edges: written again, they keep the
    // old kind, which reads back as unknown rather than as none taken.
    for loops in [Some(345), None] {
        let mut p = example_profile();
        p.events.push(counts(loops));
        assert_eq!(decode(&encode(&p)).unwrap(), p, "{loops:?}");
    }
}
