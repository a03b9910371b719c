//! Amounts in words, as every sentence rampart sends writes them (Telegram, chat services,
//! templates' placeholders).

/// `$2.1M`, `$850K`, `$950`.
pub fn usd_words(usd: f64) -> String {
    if usd >= 1e6 {
        format!("${:.1}M", usd / 1e6)
    } else if usd >= 1e3 {
        format!("${:.0}K", usd / 1e3)
    } else {
        format!("${usd:.0}")
    }
}
