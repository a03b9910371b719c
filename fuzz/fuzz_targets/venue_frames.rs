//! Fuzzes the Bybit, OKX and Bitget frame decoders and their book sync machines (venue bytes off
//! the socket): never panics, and a decoded book message applied to a book keeps it valid.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_engine::book::Book;
use rampart_engine::feed::bitget::{self, BitgetBookSync, BitgetDecoder};
use rampart_engine::feed::bybit::{self, BybitBookSync, BybitDecoder};
use rampart_engine::feed::okx::{self, OkxBookSync, OkxDecoder};

fuzz_target!(|data: &[u8]| {
    let mut book = Book::new(64);
    if let Ok(bybit::Message::Book(u)) = BybitDecoder::new(64, 64).decode(data) {
        BybitBookSync::new().on_book(&u, &mut book);
        assert!(book.check_invariants());
    }
    let mut book = Book::new(64);
    if let Ok(okx::Message::Book(p)) = OkxDecoder::new(64, 64).decode(data) {
        OkxBookSync::new(32, true).on_book(&p, &mut book);
        assert!(book.check_invariants());
    }
    let mut book = Book::new(64);
    if let Ok(bitget::Message::Book(p)) = BitgetDecoder::new(64, 64).decode(data) {
        BitgetBookSync::new(32, true).on_book(&p, &mut book);
        assert!(book.check_invariants());
    }
});
