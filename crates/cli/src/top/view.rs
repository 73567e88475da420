//! Drawing `top`: a header, the connection table, the service table and a
//! line of keys, with ratatui. Nothing here talks to the hub.

use std::cmp::Ordering;
use std::time::Duration;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, TableState};
use ratatui::Frame;

use crate::describe::duration;

use super::model::{
    connection_rows, metadata_text, principal_label, ConnectionRow, Snapshot, Tick,
};

/// Which table the keys act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Connections,
    Services,
}

/// A sortable table's state: the sort column, its direction, the scroll.
#[derive(Debug, Default)]
pub struct TableView {
    pub sort: usize,
    pub descending: bool,
    pub state: TableState,
}

pub struct View {
    pub focus: Focus,
    pub connections: TableView,
    pub services: TableView,
    /// The newest snapshot, and the tick before it (for per-connection rates).
    pub snapshot: Option<Snapshot>,
    pub previous: Option<Tick>,
    /// Why the last refresh failed, if it did.
    pub problem: Option<String>,
}

const CONNECTION_COLUMNS: [(&str, u16); 14] = [
    ("CLIENT", 36),
    ("PRINCIPAL", 10),
    ("TRANSPORT", 9),
    ("SVCS", 5),
    ("INFLIGHT", 8),
    ("QUEUED", 9),
    ("IN/S", 8),
    ("OUT/S", 8),
    ("MSGS_IN", 10),
    ("MSGS_OUT", 10),
    ("BYTES_IN", 10),
    ("BYTES_OUT", 10),
    ("DROPS", 7),
    ("UPTIME", 8),
];

const SERVICE_COLUMNS: [(&str, u16); 7] = [
    ("LABEL", 20),
    ("PROTOCOL", 14),
    ("SERVICE", 36),
    ("PRINCIPAL", 10),
    ("OWNER", 36),
    ("HUB", 8),
    ("METADATA", 30),
];

/// A value to sort by: text or a number.
#[derive(PartialEq, PartialOrd)]
enum Key {
    Number(f64),
    Text(String),
}

fn compare(a: &Key, b: &Key) -> Ordering {
    a.partial_cmp(b).unwrap_or(Ordering::Equal)
}

impl View {
    pub fn new() -> Self {
        View {
            focus: Focus::Connections,
            connections: TableView {
                sort: 6, // IN/S
                descending: true,
                state: TableState::default(),
            },
            services: TableView::default(),
            snapshot: None,
            previous: None,
            problem: None,
        }
    }

    /// Takes a new snapshot, keeping the old tick for rates.
    pub fn update(&mut self, snapshot: Snapshot) {
        if let Some(old) = self.snapshot.take() {
            self.previous = old.tick;
        }
        self.snapshot = Some(snapshot);
        self.problem = None;
    }

    fn focused(&mut self) -> (&mut TableView, usize) {
        match self.focus {
            Focus::Connections => (&mut self.connections, CONNECTION_COLUMNS.len()),
            Focus::Services => (&mut self.services, SERVICE_COLUMNS.len()),
        }
    }

    pub fn next_sort(&mut self, step: isize) {
        let (table, columns) = self.focused();
        table.sort = (table.sort as isize + step).rem_euclid(columns as isize) as usize;
    }

    pub fn reverse(&mut self) {
        let (table, _) = self.focused();
        table.descending = !table.descending;
    }

    pub fn scroll(&mut self, by: isize) {
        let (table, _) = self.focused();
        let now = table.state.selected().unwrap_or(0) as isize;
        table.state.select(Some((now + by).max(0) as usize));
    }

    pub fn switch_focus(&mut self) {
        self.focus = match self.focus {
            Focus::Connections => Focus::Services,
            Focus::Services => Focus::Connections,
        };
    }

    pub fn draw(&mut self, frame: &mut Frame) {
        let [header, connections, services, keys] = Layout::vertical([
            Constraint::Length(3),
            Constraint::Percentage(45),
            Constraint::Min(5),
            Constraint::Length(1),
        ])
        .areas(frame.area());
        frame.render_widget(self.header(), header);
        self.draw_connections(frame, connections);
        self.draw_services(frame, services);
        let help = match &self.problem {
            Some(problem) => Line::from(clean(problem)).red(),
            None => Line::from(
                "q quit   tab switch table   s/S sort column   r reverse   ↑↓ PgUp PgDn scroll",
            )
            .dim(),
        };
        frame.render_widget(Paragraph::new(help), keys);
    }

    fn header(&self) -> Paragraph<'static> {
        let Some(snapshot) = &self.snapshot else {
            return Paragraph::new("waiting for the hub…");
        };
        let tick = snapshot.tick.as_ref();
        let rates = tick.map(|t| &t.rates);
        let totals = tick.map(|t| &t.totals);
        let field = |label: &str, value: String| {
            vec![
                Span::raw(format!("{label} ")).dim(),
                Span::raw(value).bold(),
                Span::raw("   "),
            ]
        };
        let mut first = vec![Span::raw("switchboard ").bold()];
        first.extend(field("version", clean(&snapshot.hub.version)));
        first.extend(field("pid", snapshot.hub.pid.to_string()));
        first.extend(field(
            "uptime",
            duration(Duration::from_secs(tick.map_or(0, |t| t.uptime_seconds))),
        ));
        first.extend(field(
            "memory",
            tick.and_then(|t| t.rss_bytes).map_or("-".into(), bytes),
        ));
        first.extend(field(
            "connections",
            totals.map_or(0, |t| t.connections).to_string(),
        ));
        first.extend(field(
            "services",
            totals.map_or(0, |t| t.services).to_string(),
        ));
        let mut second = Vec::new();
        second.extend(field(
            "notifications/s",
            rates.map_or("-".into(), |r| rate(r.notifications)),
        ));
        second.extend(field(
            "requests/s",
            rates.map_or("-".into(), |r| rate(r.requests)),
        ));
        second.extend(field(
            "in/s",
            rates.map_or("-".into(), |r| bytes(r.bytes_in as u64)),
        ));
        second.extend(field(
            "out/s",
            rates.map_or("-".into(), |r| bytes(r.bytes_out as u64)),
        ));
        second.extend(field(
            "drops/s",
            rates.map_or("-".into(), |r| rate(r.drops.values().sum())),
        ));
        second.extend(field("p50", rates.map_or("-".into(), |r| millis(r.p50_ms))));
        second.extend(field("p99", rates.map_or("-".into(), |r| millis(r.p99_ms))));
        second.extend(field(
            "in flight",
            totals.map_or(0, |t| t.in_flight).to_string(),
        ));
        Paragraph::new(vec![Line::from(first), Line::from(second)])
            .block(Block::default().borders(Borders::BOTTOM))
    }

    fn draw_connections(&mut self, frame: &mut Frame, area: Rect) {
        let mut rows: Vec<ConnectionRow> = match &self.snapshot {
            Some(Snapshot {
                tick: Some(tick), ..
            }) => connection_rows(tick, self.previous.as_ref()),
            _ => Vec::new(),
        };
        let view = &self.connections;
        rows.sort_by(|a, b| {
            let order = compare(&connection_key(a, view.sort), &connection_key(b, view.sort));
            if view.descending {
                order.reverse()
            } else {
                order
            }
        });
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let c = &r.connection;
                vec![
                    clean(c.client_id.as_deref().unwrap_or("(not initialized)")),
                    clean(&principal_label(&c.principal)),
                    clean(&c.transport),
                    c.services.to_string(),
                    (c.in_flight + c.calls).to_string(),
                    bytes(c.queued_bytes),
                    r.in_rate.map_or("-".into(), rate),
                    r.out_rate.map_or("-".into(), rate),
                    c.messages_in.to_string(),
                    c.messages_out.to_string(),
                    bytes(c.bytes_in),
                    bytes(c.bytes_out),
                    c.drops.to_string(),
                    duration(Duration::from_secs(r.age_seconds)),
                ]
            })
            .collect();
        let title = format!(" Connections ({}) ", rows.len());
        let focused = self.focus == Focus::Connections;
        render_table(
            frame,
            area,
            &title,
            &CONNECTION_COLUMNS,
            cells,
            &mut self.connections,
            focused,
        );
    }

    fn draw_services(&mut self, frame: &mut Frame, area: Rect) {
        let services = self.snapshot.as_ref().map_or(&[][..], |s| &s.services[..]);
        let mut rows: Vec<[String; 7]> = services
            .iter()
            .map(|s| {
                [
                    clean(&metadata_text(&s.metadata, "label")),
                    clean(&metadata_text(&s.metadata, "protocol")),
                    clean(&s.service_id),
                    clean(&principal_label(&s.principal)),
                    clean(&s.client_id),
                    s.hub.as_ref().map_or("local".into(), |h| {
                        clean(h.as_str().map_or(&h.to_string(), |s| s))
                    }),
                    clean(&s.metadata.to_string()),
                ]
            })
            .collect();
        let view = &self.services;
        rows.sort_by(|a, b| {
            let order = a[view.sort].cmp(&b[view.sort]);
            if view.descending {
                order.reverse()
            } else {
                order
            }
        });
        let count = rows.len();
        let cells: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
        let title = format!(" Services ({count}) ");
        let focused = self.focus == Focus::Services;
        render_table(
            frame,
            area,
            &title,
            &SERVICE_COLUMNS,
            cells,
            &mut self.services,
            focused,
        );
    }
}

fn render_table(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    columns: &[(&str, u16)],
    rows: Vec<Vec<String>>,
    view: &mut TableView,
    focused: bool,
) {
    let count = rows.len();
    // A cell longer than its column ends in `…`, so a cut is never silent.
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|cells| {
            Row::new(
                cells
                    .iter()
                    .zip(columns)
                    .map(|(cell, (_, width))| fit(cell, *width)),
            )
        })
        .collect();
    if let Some(selected) = view.state.selected() {
        view.state
            .select(Some(selected.min(count.saturating_sub(1))));
    }
    let header = Row::new(columns.iter().enumerate().map(|(i, (name, _))| {
        let marker = match (i == view.sort, view.descending) {
            (true, true) => "▼",
            (true, false) => "▲",
            _ => "",
        };
        format!("{name}{marker}")
    }))
    .style(Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED));
    let widths: Vec<Constraint> = columns
        .iter()
        .map(|(_, w)| Constraint::Length(*w))
        .collect();
    let border = if focused {
        Style::default().bold()
    } else {
        Style::default().dim()
    };
    let table = Table::new(rows, widths)
        .header(header)
        .block(
            Block::default()
                .borders(Borders::TOP)
                .title(title.to_owned())
                .border_style(border),
        )
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    frame.render_stateful_widget(table, area, &mut view.state);
}

fn connection_key(row: &ConnectionRow, column: usize) -> Key {
    let c = &row.connection;
    let n = |v: u64| Key::Number(v as f64);
    match column {
        0 => Key::Text(c.client_id.clone().unwrap_or_default()),
        1 => Key::Text(principal_label(&c.principal)),
        2 => Key::Text(c.transport.clone()),
        3 => n(c.services),
        4 => n(c.in_flight + c.calls),
        5 => n(c.queued_bytes),
        6 => Key::Number(row.in_rate.unwrap_or(-1.0)),
        7 => Key::Number(row.out_rate.unwrap_or(-1.0)),
        8 => n(c.messages_in),
        9 => n(c.messages_out),
        10 => n(c.bytes_in),
        11 => n(c.bytes_out),
        12 => n(c.drops),
        _ => n(row.age_seconds),
    }
}

/// Text a client wrote, safe for a terminal: control characters (escape
/// sequences included) become spaces.
pub fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

pub fn rate(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.2}M", value / 1e6)
    } else if value >= 1e4 {
        format!("{:.1}k", value / 1e3)
    } else if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

pub fn bytes(value: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut size = value as f64;
    let mut unit = 0;
    while size >= 1024.0 && unit < UNITS.len() - 1 {
        size /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value} B")
    } else {
        format!("{size:.1} {}", UNITS[unit])
    }
}

/// `text` cut to `width` columns of the terminal, its last one `…` when it
/// was longer.
pub fn fit(text: &str, width: u16) -> String {
    let width = usize::from(width);
    if text.width() <= width {
        return text.to_owned();
    }
    let mut fitted = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        fitted.push(c);
        used += w;
    }
    if width > 0 {
        fitted.push('…');
    }
    fitted
}

fn millis(value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(ms) if ms < 1.0 => format!("{:.0}µs", ms * 1000.0),
        Some(ms) if ms < 1000.0 => format!("{ms:.1}ms"),
        Some(ms) => format!("{:.2}s", ms / 1000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_cleans() {
        assert_eq!(clean("a\u{1b}[2Jb\n"), "a [2Jb ");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(duration(Duration::from_secs(3725)), "1h 2m");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(fit("日本語です", 5), "日本…");
        assert_eq!(rate(12345.0), "12.3k");
        assert_eq!(millis(Some(0.5)), "500µs");
    }
}
