//! Reading the hub's Prometheus text.

/// The value of one sample in Prometheus text, e.g.
/// `switchboard_requests_failed_total{reason="disconnected"}`; fails if the
/// sample is missing or not an integer.
pub fn metric_value(text: &str, sample: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {sample} in the metrics:\n{text}"))
        .parse()
        .unwrap_or_else(|_| panic!("sample {sample} is not an integer"))
}
