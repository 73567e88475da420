//! The gateway's stdin and stdout as streams the runtime polls itself.
//!
//! `tokio::io::stdin()` and `stdout()` do every read and write on the
//! blocking pool, because stdio may be a terminal or a file, which epoll
//! cannot wait on: each line is a hand-off to a pool thread and back, two
//! thread wakes per message (measured on the gateway benchmark: most of
//! the `switchboard mcp` process's time per call). An MCP host starts the
//! gateway with pipes (or, Node's hosts, a socket pair) on both, and those
//! epoll can wait on: a descriptor of that kind is made non-blocking and
//! registered with the runtime. Anything else (a terminal, a file) keeps
//! tokio's pool.
//!
//! Non-blocking is a property of the open file description, which the
//! other descriptors sharing it see too. The host's ends of its pipes are
//! other descriptions, so they are not affected; but stdout shared with
//! stderr (`2>&1`) would make log writes fail when the pipe is full, so a
//! stdout on the same pipe or socket as stderr keeps tokio's pool.

use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

/// stdin, polled by the runtime when it is a pipe or a socket.
pub(crate) fn stdin() -> Box<dyn AsyncRead + Send + Unpin> {
    match pollable(io::stdin().as_fd(), false) {
        Some(Pollable::Pipe(file)) => match pipe::Receiver::from_file(file) {
            Ok(receiver) => return Box::new(receiver),
            Err(error) => fallback("stdin", &error),
        },
        Some(Pollable::Socket(fd)) => match socket(fd) {
            Ok(stream) => return Box::new(stream),
            Err(error) => fallback("stdin", &error),
        },
        None => {}
    }
    Box::new(tokio::io::stdin())
}

/// stdout, polled by the runtime when it is a pipe or a socket that stderr
/// does not share.
pub(crate) fn stdout() -> Box<dyn AsyncWrite + Send + Unpin> {
    match pollable(io::stdout().as_fd(), true) {
        Some(Pollable::Pipe(file)) => match pipe::Sender::from_file(file) {
            Ok(sender) => return Box::new(sender),
            Err(error) => fallback("stdout", &error),
        },
        Some(Pollable::Socket(fd)) => match socket(fd) {
            Ok(stream) => return Box::new(stream),
            Err(error) => fallback("stdout", &error),
        },
        None => {}
    }
    Box::new(tokio::io::stdout())
}

enum Pollable {
    Pipe(File),
    Socket(OwnedFd),
}

/// A duplicate of `fd` if epoll can wait on it (a FIFO or a socket) and,
/// with `not_stderrs`, stderr is not the same pipe or socket.
fn pollable(fd: BorrowedFd<'_>, not_stderrs: bool) -> Option<Pollable> {
    let owned = fd.try_clone_to_owned().ok()?;
    let file = File::from(owned);
    let metadata = file.metadata().ok()?;
    if not_stderrs && shares_stderr(&metadata) {
        return None;
    }
    let kind = metadata.file_type();
    if kind.is_fifo() {
        Some(Pollable::Pipe(file))
    } else if kind.is_socket() {
        Some(Pollable::Socket(OwnedFd::from(file)))
    } else {
        None
    }
}

fn shares_stderr(stdout: &Metadata) -> bool {
    let Ok(stderr) = io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    File::from(stderr)
        .metadata()
        .is_ok_and(|stderr| stderr.dev() == stdout.dev() && stderr.ino() == stdout.ino())
}

/// A stream socket (a socket pair, as Node gives a child's stdio) as a
/// tokio stream: only read and write are used, which any stream socket
/// has, whatever its family.
fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(stream)
}

fn fallback(which: &str, error: &io::Error) {
    tracing::debug!(%error, "{which} cannot be polled by the runtime; reading it on the blocking pool");
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn a_pipe_is_polled_by_the_runtime_and_carries_lines() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let Some(Pollable::Pipe(file)) = pollable(reader.as_fd(), false) else {
            panic!("a pipe is pollable");
        };
        let mut receiver = pipe::Receiver::from_file(file).unwrap();
        writer.write_all(b"{\"jsonrpc\":\"2.0\"}\n").unwrap();
        drop(writer);
        let mut line = String::new();
        receiver.read_to_string(&mut line).await.unwrap();
        assert_eq!(line, "{\"jsonrpc\":\"2.0\"}\n");
    }

    #[tokio::test]
    async fn a_socket_pair_is_polled_by_the_runtime_both_ways() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let Some(Pollable::Socket(fd)) = pollable(ours.as_fd(), false) else {
            panic!("a socket is pollable");
        };
        let mut stream = socket(fd).unwrap();
        stream.write_all(b"out\n").await.unwrap();
        let mut out = [0u8; 4];
        std::io::Read::read_exact(&mut theirs, &mut out).unwrap();
        assert_eq!(&out, b"out\n");
        theirs.write_all(b"in\n").unwrap();
        let mut back = [0u8; 3];
        stream.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"in\n");
    }

    #[test]
    fn a_file_is_left_to_the_blocking_pool() {
        let file = unlinked_file();
        assert!(pollable(file.as_fd(), false).is_none());
    }

    fn unlinked_file() -> File {
        let path = std::env::temp_dir().join(format!("sb-stdio-{}", std::process::id()));
        let file = File::create(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        file
    }
}
