//! How commands show a service: one-line summaries for tables and errors,
//! and the wire shape for `--json`.

use serde_json::{json, Value};
use switchboard_client::ServiceInfo;

/// Metadata keys shown by name, in this order, when present.
const SUMMARY_KEYS: [&str; 4] = ["protocol", "version", "label", "namespace"];
/// The most characters of compact JSON shown for metadata without those keys.
const SUMMARY_CHARS: usize = 60;

/// `protocol=git-object-reader version=1 label="git: proj" +2 more`, or the
/// compact JSON (truncated) when none of the usual keys is there.
pub fn metadata_summary(metadata: &Value) -> String {
    let Some(object) = metadata.as_object() else {
        return truncate(&metadata.to_string());
    };
    let shown: Vec<String> = SUMMARY_KEYS
        .iter()
        .filter_map(|key| {
            object
                .get(*key)
                .map(|value| format!("{key}={}", scalar(value)))
        })
        .collect();
    if shown.is_empty() {
        return truncate(&metadata.to_string());
    }
    let others = object.len() - shown.len();
    let mut summary = shown.join(" ");
    if others > 0 {
        summary.push_str(&format!(" +{others} more"));
    }
    summary
}

/// A value as one token: bare when it is a plain word, JSON otherwise.
fn scalar(value: &Value) -> String {
    match value {
        Value::String(text)
            if !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:@+".contains(c)) =>
        {
            text.clone()
        }
        other => truncate(&other.to_string()),
    }
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(SUMMARY_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A service as the catalog sends it on the wire.
pub fn service_json(service: &ServiceInfo) -> Value {
    let mut json = json!({
        "serviceId": service.service_id,
        "clientId": service.client_id,
        "principal": service.principal,
        "metadata": service.metadata,
    });
    if let (Some(hub), Some(object)) = (service.hub(), json.as_object_mut()) {
        object.insert("hub".into(), json!(hub));
    }
    json
}

/// `svc-…  direct  protocol=…`: one line per service, for error messages.
pub fn one_line(service: &ServiceInfo) -> String {
    format!(
        "{}  {}  {}",
        service.service_id,
        service.principal.label(),
        metadata_summary(&service.metadata)
    )
}

/// Rows as aligned columns (two spaces apart), no trailing spaces.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (column, cell) in row.iter().enumerate() {
            if column + 1 == row.len() {
                line.push_str(cell);
            } else {
                let pad = widths[column] - cell.chars().count();
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_name_the_usual_keys_then_count_the_rest() {
        let metadata = json!({"protocol": "git-object-reader", "version": 1, "label": "git: proj", "repos": ["proj"]});
        assert_eq!(
            metadata_summary(&metadata),
            "protocol=git-object-reader version=1 label=\"git: proj\" +1 more"
        );
        assert_eq!(metadata_summary(&json!({})), "{}");
        let long = json!({"x": "y".repeat(100)});
        let summary = metadata_summary(&long);
        assert!(summary.starts_with("{\"x\":\"yyy"));
        assert_eq!(summary.chars().count(), SUMMARY_CHARS + 1);
    }

    #[test]
    fn tables_align_columns_without_trailing_spaces() {
        let rows = vec![
            vec!["a".to_owned(), "long value".to_owned(), "".to_owned()],
            vec!["bbb".to_owned(), "v".to_owned(), "end".to_owned()],
        ];
        assert_eq!(
            table(&["K", "VALUE", "LAST"], &rows),
            "K    VALUE       LAST\na    long value\nbbb  v           end\n"
        );
    }
}

/// `3h 2m`, `5m 12s`, `41s`, `0.3s`: two units at most, the one duration
/// format of every command (and of the dashboard's page).
pub fn duration(elapsed: std::time::Duration) -> String {
    let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    let seconds = ms / 1000;
    match seconds {
        0 => format!("0.{}s", ms / 100),
        1..=59 => format!("{seconds}s"),
        60..=3599 => format!("{}m {}s", seconds / 60, seconds % 60),
        3600..=86399 => format!("{}h {}m", seconds / 3600, (seconds % 3600) / 60),
        _ => format!("{}d {}h", seconds / 86400, (seconds % 86400) / 3600),
    }
}

#[cfg(test)]
mod duration_tests {
    use super::duration;
    use std::time::Duration;

    #[test]
    fn durations_use_two_units_at_most() {
        let ms = Duration::from_millis;
        assert_eq!(duration(ms(300)), "0.3s");
        assert_eq!(duration(ms(41_000)), "41s");
        assert_eq!(duration(ms(312_000)), "5m 12s");
        assert_eq!(duration(ms(3 * 3600 * 1000 + 125_000)), "3h 2m");
        assert_eq!(duration(ms(2 * 86_400_000 + 3_700_000)), "2d 1h");
    }
}
