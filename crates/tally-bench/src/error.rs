//! Errors that stop `tally bench` before or instead of measuring.
//!
//! A benchmark that fails while running is not one of these: it is a
//! measurement outcome, recorded and reported, and the run goes on.

use std::path::PathBuf;

/// Why `tally bench` could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The suite file or directory is missing, malformed or inconsistent.
    #[error("suite: {0}")]
    Suite(String),
    /// An executor specification is malformed or its program cannot start.
    #[error("executor {name}: {message}")]
    Executor {
        /// The executor's name as given on the command line.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// The command line is inconsistent in a way clap cannot see.
    #[error("{0}")]
    Usage(String),
    /// A results file cannot be read or is not one of ours.
    #[error("{path}: {message}")]
    Results {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// An output file could not be written (and was not: see `tally_output`).
    #[error(transparent)]
    Output(#[from] tally_output::OutputError),
    /// Making the output directory failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl BenchError {
    /// The exit status `tally bench` ends with: 1 for a results file it cannot read (bad
    /// input, as `tally report` answers for a damaged profile), 2 for everything that stops
    /// it before or instead of its work (usage, suite, executors, output).
    pub fn exit_code(&self) -> u8 {
        match self {
            BenchError::Results { .. } => 1,
            _ => 2,
        }
    }
}
