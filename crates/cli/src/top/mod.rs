//! `switchboard top`: the dashboard's data in the terminal, like nats-top.
//!
//! Every second it asks the hub for the dashboard's snapshot
//! (`hub/dashboardSnapshot`, over the Unix socket with the `direct` token):
//! the same JSON the page starts from, so both views show one model. The
//! terminal is drawn by ratatui on crossterm (works over SSH); the screen
//! loop runs on a blocking thread, the hub calls on the runtime.

mod model;
mod view;

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use serde_json::json;
use switchboard_client::protocol::hub::method;
use switchboard_client::Client;

use crate::connect;
use crate::Exit;
use model::Snapshot;
use view::View;

/// How often the hub is asked.
const REFRESH: Duration = Duration::from_secs(1);
/// How long the screen loop waits for a key before it looks for news.
const KEY_WAIT: Duration = Duration::from_millis(100);

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Keys: q (or Esc, Ctrl-C) quits; Tab switches between the connection and the
service table; s / S pick the next / previous sort column; r reverses the
order; arrows, PgUp, PgDn, Home scroll. Rates are per second, over the last
second.")]
pub struct TopArgs {
    #[command(flatten)]
    hub: connect::HubArgs,
}

pub async fn top(args: TopArgs) -> anyhow::Result<()> {
    // The snapshot is the hub's own user's (`direct`).
    args.hub.local_only("switchboard top")?;
    // Without a terminal the screen cannot be drawn, and trying leaves
    // escape sequences behind: say so before anything is written.
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return Err(Exit {
            status: 2,
            message: "switchboard top needs a terminal for its input and output (over SSH, \
                      `ssh -t`); without one, `switchboard status --watch` or \
                      `switchboard services --watch` show the same live"
                .into(),
        }
        .into());
    }
    let client = connect::connect(&args.hub, "top").await?;
    // The first one before the screen changes, so a refusal reads plainly.
    let first = fetch(&client).await?;
    let (news, screen_news) = mpsc::channel();
    let _ = news.send(Ok(first));
    let fetcher = tokio::spawn(async move {
        loop {
            tokio::time::sleep(REFRESH).await;
            let snapshot = fetch(&client).await.map_err(|error| format!("{error:#}"));
            let gone = snapshot.is_err() && client.is_closed();
            if news.send(snapshot).is_err() || gone {
                return;
            }
        }
    });
    let screen = tokio::task::spawn_blocking(move || run_screen(&screen_news));
    let outcome = screen.await.context("the screen thread failed")?;
    fetcher.abort();
    outcome
}

async fn fetch(client: &Client) -> anyhow::Result<Snapshot> {
    let answer = client
        .call_hub(method::DASHBOARD_SNAPSHOT, &json!({}))
        .await
        .context("the hub did not give its dashboard snapshot")?;
    serde_json::from_str(answer.get()).context("the hub's dashboard snapshot")
}

/// The screen until `q`: draws whenever news comes or a key is pressed.
fn run_screen(news: &mpsc::Receiver<Result<Snapshot, String>>) -> anyhow::Result<()> {
    let mut terminal = ratatui::init();
    let outcome = screen_loop(&mut terminal, news);
    ratatui::restore();
    outcome
}

fn screen_loop(
    terminal: &mut ratatui::DefaultTerminal,
    news: &mpsc::Receiver<Result<Snapshot, String>>,
) -> anyhow::Result<()> {
    let mut view = View::new();
    let mut dirty = true;
    loop {
        loop {
            match news.try_recv() {
                Ok(Ok(snapshot)) => view.update(snapshot),
                Ok(Err(problem)) => view.problem = Some(format!("refresh failed: {problem}")),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    anyhow::bail!(
                        "lost the hub: {}",
                        view.problem.as_deref().unwrap_or("the connection closed")
                    )
                }
            }
            dirty = true;
        }
        if dirty {
            terminal
                .draw(|frame| view.draw(frame))
                .context("cannot draw on the terminal")?;
            dirty = false;
        }
        if !event::poll(KEY_WAIT).context("cannot read the terminal")? {
            continue;
        }
        let Event::Key(key) = event::read().context("cannot read the terminal")? else {
            dirty = true; // a resize
            continue;
        };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        dirty = true;
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return Ok(()),
            KeyCode::Tab | KeyCode::BackTab => view.switch_focus(),
            KeyCode::Char('s') | KeyCode::Right => view.next_sort(1),
            KeyCode::Char('S') | KeyCode::Left => view.next_sort(-1),
            KeyCode::Char('r') => view.reverse(),
            KeyCode::Down | KeyCode::Char('j') => view.scroll(1),
            KeyCode::Up | KeyCode::Char('k') => view.scroll(-1),
            KeyCode::PageDown => view.scroll(20),
            KeyCode::PageUp => view.scroll(-20),
            KeyCode::Home => view.scroll(-1_000_000),
            _ => {}
        }
    }
}
