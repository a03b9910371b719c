//! Fuzzes the perpetual-frame decoders of the four venues (venue bytes off the socket, and OKX's REST
//! funding body): never panics, keeps at most its bound of items, and every value it hands out is what the module doc
//! promises (finite numbers, prices above zero, quantities at or above zero, symbols inside the
//! frame).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_engine::feed::perp::binance::BinancePerpDecoder;
use rampart_engine::feed::perp::bitget::BitgetPerpDecoder;
use rampart_engine::feed::perp::bybit::BybitPerpDecoder;
use rampart_engine::feed::perp::okx::OkxPerpDecoder;
use rampart_engine::feed::perp::PerpMessage;

/// Items per message the decoders hold here: small, so the bound is met often.
const ITEMS_MAX: usize = 4;

fn check(frame: &[u8], m: PerpMessage<'_>) {
    let inside = |s: &[u8]| {
        let (start, end) = (frame.as_ptr() as usize, frame.as_ptr() as usize + frame.len());
        s.is_empty() || (s.as_ptr() as usize >= start && s.as_ptr() as usize + s.len() <= end)
    };
    match m {
        PerpMessage::Liquidations(b) => {
            assert!(b.len() <= ITEMS_MAX);
            for e in b.iter() {
                assert!(inside(e.symbol));
                assert!(e.value.price.is_finite() && e.value.price > 0.0);
                assert!(e.value.qty.is_finite() && e.value.qty >= 0.0);
                assert!(e.value.ts_ms >= 0);
            }
        }
        PerpMessage::Updates(b) => {
            assert!(b.len() <= ITEMS_MAX);
            for e in b.iter() {
                assert!(inside(e.symbol));
                let u = e.value;
                for p in [u.mark, u.index].into_iter().flatten() {
                    assert!(p.is_finite() && p > 0.0);
                }
                for q in [u.oi_base, u.oi_contracts, u.oi_usd].into_iter().flatten() {
                    assert!(q.is_finite() && q >= 0.0);
                }
                assert!(u.funding_rate.is_none_or(f64::is_finite));
                assert!(u.funding_interval_ms.is_none_or(|i| i > 0));
            }
        }
        PerpMessage::Reply(r) => {
            assert!(r.op.is_none_or(inside) && r.msg.is_none_or(inside));
        }
        PerpMessage::Pong | PerpMessage::Other => {}
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = BinancePerpDecoder::new(ITEMS_MAX, ITEMS_MAX).decode(data) {
        check(data, m);
    }
    if let Ok(m) = BybitPerpDecoder::new(ITEMS_MAX, ITEMS_MAX).decode(data) {
        check(data, m);
    }
    if let Ok(m) = OkxPerpDecoder::new(ITEMS_MAX, ITEMS_MAX).decode(data) {
        check(data, m);
    }
    if let Ok(m) = OkxPerpDecoder::new(ITEMS_MAX, ITEMS_MAX).decode_funding_rest(data) {
        check(data, m);
    }
    if let Ok(m) = BitgetPerpDecoder::new(ITEMS_MAX).decode(data) {
        check(data, m);
    }
});
