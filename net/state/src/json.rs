//! A small JSON writer for responses: no intermediate tree, numbers written exactly.

use rampart_engine::fixed::format_decimal;

/// Appends JSON text to a growing buffer.
#[derive(Debug, Default)]
pub struct Json {
    buf: String,
}

impl Json {
    /// An empty writer with room for `cap` bytes.
    pub fn with_capacity(cap: usize) -> Json {
        Json { buf: String::with_capacity(cap) }
    }

    /// Raw JSON text (punctuation, keys already quoted).
    pub fn raw(&mut self, s: &str) -> &mut Json {
        self.buf.push_str(s);
        self
    }

    /// A quoted, escaped string.
    pub fn str(&mut self, s: &str) -> &mut Json {
        self.buf.push('"');
        for c in s.chars() {
            match c {
                '"' => self.buf.push_str("\\\""),
                '\\' => self.buf.push_str("\\\\"),
                '\n' => self.buf.push_str("\\n"),
                '\r' => self.buf.push_str("\\r"),
                '\t' => self.buf.push_str("\\t"),
                c if (c as u32) < 0x20 => {
                    self.buf.push_str(&format!("\\u{:04x}", c as u32));
                }
                c => self.buf.push(c),
            }
        }
        self.buf.push('"');
        self
    }

    /// A fixed-point value (scaled by 10^8) as an exact decimal number.
    pub fn fixed(&mut self, v: i64) -> &mut Json {
        let mut b = [0u8; 24];
        self.buf.push_str(format_decimal(v, &mut b));
        self
    }

    /// An integer.
    pub fn int(&mut self, v: i64) -> &mut Json {
        self.buf.push_str(itoa(v, &mut [0u8; 20]));
        self
    }

    /// A float with at most `decimals` decimals; non-finite values are written as `null`.
    pub fn float(&mut self, v: f64, decimals: usize) -> &mut Json {
        if v.is_finite() {
            let text = format!("{v:.decimals$}");
            let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
            self.buf.push_str(if text == "-0" { "0" } else { text });
        } else {
            self.buf.push_str("null");
        }
        self
    }

    /// A boolean.
    pub fn bool(&mut self, v: bool) -> &mut Json {
        self.buf.push_str(if v { "true" } else { "false" });
        self
    }

    /// The text written so far.
    pub fn finish(self) -> String {
        self.buf
    }
}

fn itoa(v: i64, buf: &mut [u8; 20]) -> &str {
    let mut n = buf.len();
    let mut u = v.unsigned_abs();
    loop {
        n -= 1;
        buf[n] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        n -= 1;
        buf[n] = b'-';
    }
    core::str::from_utf8(&buf[n..]).unwrap_or("0")
}

/// `{"error":"<message>"}`.
pub fn error_body(message: &str) -> String {
    let mut j = Json::with_capacity(message.len() + 16);
    j.raw("{\"error\":").str(message).raw("}");
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_valid_json() {
        let mut j = Json::default();
        j.raw("{\"a\":")
            .str("q\"\\\n\u{1}")
            .raw(",\"b\":")
            .fixed(150_000_000)
            .raw(",\"c\":")
            .int(-42)
            .raw(",\"d\":")
            .bool(true)
            .raw("}");
        let text = j.finish();
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid json");
        assert_eq!(v["a"], "q\"\\\n\u{1}");
        assert_eq!(v["b"], 1.5);
        assert_eq!(v["c"], -42);
        assert_eq!(error_body("x"), "{\"error\":\"x\"}");
        let mut j = Json::default();
        j.float(1.23456, 2).raw(",").float(-0.0001, 2).raw(",").float(f64::NAN, 2).raw(",").float(10.0, 2);
        assert_eq!(j.finish(), "1.23,0,null,10");
        let mut j = Json::default();
        j.int(i64::MIN);
        assert_eq!(j.finish(), i64::MIN.to_string());
    }
}
