//! The floor relay: names, routing, and what it does with bad input.

use crate::support::TestFloor;
use switchboard_bench::lines::LineBuf;
use switchboard_bench::systems::floor;
use switchboard_testkit::within;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedReadHalf;

async fn next_line(read: &mut OwnedReadHalf, buf: &mut LineBuf) -> Option<Vec<u8>> {
    within("a line", async {
        loop {
            if let Some(line) = buf.take_line() {
                return Some(line);
            }
            if buf.fill(read).await.unwrap() == 0 {
                return None;
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_line_reaches_the_named_connection_with_the_senders_name_in_front() {
    let floor = TestFloor::start();
    let (mut a_read, mut a_write, mut a_buf) =
        floor::connect(&floor.socket, "alice").await.unwrap();
    let (mut b_read, mut b_write, mut b_buf) = floor::connect(&floor.socket, "bob").await.unwrap();

    a_write
        .write_all(b"bob {\"n\":1}\nbob {\"n\":2}\n")
        .await
        .unwrap();
    assert_eq!(
        next_line(&mut b_read, &mut b_buf).await.unwrap(),
        b"alice {\"n\":1}"
    );
    assert_eq!(
        next_line(&mut b_read, &mut b_buf).await.unwrap(),
        b"alice {\"n\":2}"
    );

    // The reply finds its way back by the name it came with.
    b_write.write_all(b"alice {\"ok\":true}\n").await.unwrap();
    assert_eq!(
        next_line(&mut a_read, &mut a_buf).await.unwrap(),
        b"bob {\"ok\":true}"
    );
}

#[tokio::test]
async fn a_line_split_across_writes_is_relayed_whole() {
    let floor = TestFloor::start();
    let (_a_read, mut a_write, _) = floor::connect(&floor.socket, "a").await.unwrap();
    let (mut b_read, _b_write, mut b_buf) = floor::connect(&floor.socket, "b").await.unwrap();
    a_write.write_all(b"b hel").await.unwrap();
    a_write.flush().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    a_write.write_all(b"lo\n").await.unwrap();
    assert_eq!(
        next_line(&mut b_read, &mut b_buf).await.unwrap(),
        b"a hello"
    );
}

#[tokio::test]
async fn a_name_already_taken_is_refused() {
    let floor = TestFloor::start();
    let _first = floor::connect(&floor.socket, "same").await.unwrap();
    let error = floor::connect(&floor.socket, "same").await.unwrap_err();
    assert!(format!("{error:#}").contains("name taken"), "{error:#}");
}

#[tokio::test]
async fn lines_for_unknown_targets_are_dropped_and_routing_goes_on() {
    let floor = TestFloor::start();
    let (_a_read, mut a_write, _) = floor::connect(&floor.socket, "a").await.unwrap();
    let (mut b_read, _b_write, mut b_buf) = floor::connect(&floor.socket, "b").await.unwrap();
    a_write
        .write_all(b"nobody {\"lost\":1}\nno-space-line\nb {\"kept\":1}\n")
        .await
        .unwrap();
    assert_eq!(
        next_line(&mut b_read, &mut b_buf).await.unwrap(),
        b"a {\"kept\":1}"
    );
}

#[tokio::test]
async fn a_name_is_free_again_once_its_connection_closed() {
    let floor = TestFloor::start();
    let first = floor::connect(&floor.socket, "reused").await.unwrap();
    drop(first);
    within("the name to be released", async {
        loop {
            if floor::connect(&floor.socket, "reused").await.is_ok() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// `switchboard-floor -- PROGRAM` (the gateway workload's floor): bytes
/// pass both ways through a chain of two relays unchanged, and the end of
/// the first relay's stdin reaches the program, whose exit ends the chain.
#[tokio::test]
async fn a_chain_of_stdio_relays_passes_bytes_both_ways_and_ends_with_its_program() {
    use std::process::Stdio;
    use tokio::io::{AsyncBufReadExt, BufReader};

    let floor = env!("CARGO_BIN_EXE_switchboard-floor");
    let mut chain = tokio::process::Command::new(floor)
        .args(["--", floor, "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = chain.stdin.take().unwrap();
    let mut stdout = BufReader::new(chain.stdout.take().unwrap());
    let mut line = String::new();
    for message in ["{\"id\":1}", "{\"id\":2,\"text\":\"é\"}"] {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        line.clear();
        within("the line back", stdout.read_line(&mut line))
            .await
            .unwrap();
        assert_eq!(line, format!("{message}\n"));
    }
    drop(stdin);
    let status = within("the chain's exit", chain.wait()).await.unwrap();
    assert!(status.success(), "{status:?}");
}
