use std::io::Write;
use std::path::Path;

use super::*;

#[test]
fn a_file_is_written_whole_and_nothing_else_is_left() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("out.txt");
    write(&target, b"hello", IfExists::Refuse).unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"hello");
    assert_eq!(entries(d.path()), ["out.txt"]);
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&target).unwrap().permissions());
    assert_ne!(
        mode & 0o044,
        0,
        "a written file is readable as new files are: {mode:o}"
    );
}

#[test]
fn an_existing_file_is_refused_unless_it_may_be_replaced() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("out.txt");
    std::fs::write(&target, b"old").unwrap();
    let e = write(&target, b"new", IfExists::Refuse).unwrap_err();
    assert!(matches!(e, OutputError::Exists { .. }), "{e}");
    assert!(e.to_string().contains("pass --force"), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"old");
    write(&target, b"new", IfExists::Replace).unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"new");
    assert_eq!(entries(d.path()), ["out.txt"]);
}

#[test]
fn a_writer_dropped_before_its_commit_leaves_the_target_as_it_was() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("out.txt");
    std::fs::write(&target, b"old").unwrap();
    let mut out = OutputFile::create(&target, IfExists::Replace).unwrap();
    out.write_all(b"half of a new fi").unwrap();
    assert_eq!(
        entries(d.path()).len(),
        2,
        "the temporary is beside the target"
    );
    drop(out);
    assert_eq!(std::fs::read(&target).unwrap(), b"old");
    assert_eq!(entries(d.path()), ["out.txt"]);
}

#[test]
fn a_target_that_appears_meanwhile_is_kept_without_replace() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("out.txt");
    let mut out = OutputFile::create(&target, IfExists::Refuse).unwrap();
    out.write_all(b"mine").unwrap();
    std::fs::write(&target, b"theirs").unwrap();
    let e = out.commit().unwrap_err();
    assert!(matches!(e, OutputError::Appeared { .. }), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"theirs");
    assert_eq!(entries(d.path()), ["out.txt"]);
}

#[test]
fn directories_missing_or_in_the_way_are_refused_before_anything_is_written() {
    let d = tempfile::tempdir().unwrap();
    let e = write(d.path(), b"x", IfExists::Replace).unwrap_err();
    assert!(matches!(e, OutputError::IsDirectory { .. }), "{e}");
    let e = write(&d.path().join("no/such/file"), b"x", IfExists::Replace).unwrap_err();
    assert!(matches!(e, OutputError::NoDirectory { .. }), "{e}");
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert!(entries(d.path()).is_empty());
}

#[test]
fn a_device_is_written_in_place() {
    write(Path::new("/dev/null"), b"gone", IfExists::Refuse).unwrap();
    let kind = std::fs::metadata("/dev/null").unwrap().file_type();
    assert!(
        std::os::unix::fs::FileTypeExt::is_char_device(&kind),
        "/dev/null was replaced"
    );
}

#[test]
fn a_stream_has_a_name_of_its_own_and_becomes_the_target_when_committed() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("run.profile");
    let mut a = Stream::create(&target, IfExists::Refuse).unwrap();
    let b = Stream::create(&target, IfExists::Refuse).unwrap();
    let pid = std::process::id();
    assert_eq!(
        a.partial(),
        d.path().join(format!("run.profile.{pid}.partial"))
    );
    assert_eq!(
        b.partial(),
        d.path().join(format!("run.profile.{pid}.1.partial"))
    );
    a.append(b"chunk one,").unwrap();
    a.append(b"chunk two").unwrap();
    assert_eq!(a.len(), 19);
    b.discard();
    assert_eq!(a.commit().map_err(|u| u.error).unwrap(), target);
    assert_eq!(std::fs::read(&target).unwrap(), b"chunk one,chunk two");
    assert_eq!(entries(d.path()), ["run.profile"]);
}

#[test]
fn a_stream_dropped_unfinished_stays_as_a_crashed_run_leaves_it() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("run.profile");
    let mut s = Stream::create(&target, IfExists::Refuse).unwrap();
    s.append(b"so far").unwrap();
    let partial = s.partial().to_path_buf();
    drop(s);
    assert_eq!(std::fs::read(&partial).unwrap(), b"so far");
    assert!(!target.exists());
}

#[test]
fn a_stream_refused_at_its_commit_can_be_kept_under_its_own_name() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("run.profile");
    let mut s = Stream::create(&target, IfExists::Refuse).unwrap();
    s.append(b"mine").unwrap();
    std::fs::write(&target, b"theirs").unwrap();
    let refused = *s.commit().unwrap_err();
    let e = refused.error;
    assert!(matches!(e, OutputError::Appeared { .. }), "{e}");
    let kept = refused.stream.keep();
    assert_eq!(std::fs::read(&kept).unwrap(), b"mine");
    assert_eq!(std::fs::read(&target).unwrap(), b"theirs");
}

#[test]
fn streams_on_one_target_leave_one_of_them_whole() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("run.profile");
    let contents: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 4096 * (1 + i as usize)]).collect();
    std::thread::scope(|scope| {
        for c in &contents {
            let target = &target;
            scope.spawn(move || {
                let mut s = Stream::create(target, IfExists::Replace).unwrap();
                for piece in c.chunks(1000) {
                    s.append(piece).unwrap();
                }
                s.commit().map_err(|u| u.error).unwrap();
            });
        }
    });
    let got = std::fs::read(&target).unwrap();
    assert!(
        contents.contains(&got),
        "{} bytes, not one stream's",
        got.len()
    );
    assert_eq!(entries(d.path()), ["run.profile"]);
}
