#![no_main]
//! Feeds arbitrary bytes, LZ4-framed, to the trace reader: nothing may panic; every
//! rejection must render; whatever is accepted must write back, through the writer, as a
//! trace that reads the same.

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use lz4_flex::frame::FrameEncoder;
use tally_vertical::trace::{TraceReader, TraceWriter};

fuzz_target!(|data: &[u8]| {
    let mut z = FrameEncoder::new(Vec::new());
    z.write_all(data).unwrap();
    let compressed = z.finish().unwrap();
    let records = match TraceReader::new(&compressed[..]) {
        Ok(reader) => reader.collect::<Result<Vec<_>, _>>(),
        Err(e) => Err(e),
    };
    match records {
        Ok(records) => {
            let mut w = TraceWriter::new(Vec::new());
            for r in &records {
                r.replay(&mut w);
            }
            let again: Vec<_> = TraceReader::new(&w.close().unwrap()[..])
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(again, records);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
