// The value sets of docs/openapi.json and decisions.md §9, §10 that more than one part of the site offers.

/** The venues known before `/site/v1/exchanges` answers (and kept if it never does). */
export const VENUES = ['binance', 'bybit', 'okx', 'bitget'];

const VENUE_NAMES = { binance: 'Binance', bybit: 'Bybit', okx: 'OKX', bitget: 'Bitget' };

/** A venue as people write it: "Binance", "OKX" (an unknown one as the API spells it). */
export function venueName(v) { return VENUE_NAMES[v] || v; }

/** The symbol of an alert on every pair of its venue, pairs listed later included (decisions.md §15). */
export const EVERY_PAIR = '*';

/** The alert types that may watch a whole venue: a price belongs to one pair. */
export const VENUE_WIDE_TYPES = ['pct', 'level', 'wall', 'liquidations', 'oi', 'funding'];

/** The candle intervals of the API. */
export const INTERVALS = ['5m', '15m', '1h', '4h', '1d', '1w'];

/** The screener's universes: [value, words]. */
export const CATEGORIES = [
  ['all', 'All pairs'], ['usdt', 'USDT-quoted'], ['usdc', 'USDC-quoted'],
  ['btc', 'BTC-quoted'], ['new', 'New (under 30 days)'],
];

/** The board numbers a market alert can watch: [value, words]. */
export const BOARD_NUMBERS = [
  ['sentiment', 'Sentiment'], ['advancing', 'Advancing'], ['declining', 'Declining'],
  ['up5', 'Up 5% or more'], ['down5', 'Down 5% or more'], ['walls', 'Walls'], ['atLevel', 'At a level'],
  // The perpetuals' numbers (decisions.md §17).
  ['perps', 'Pairs with a perpetual'], ['liqLongUsd', 'Longs liquidated (USD)'], ['liqShortUsd', 'Shorts liquidated (USD)'],
  ['oiUsd', 'Open interest (USD)'], ['oiChange', 'Open interest change %'], ['funding', 'Funding per 8 h %'],
  ['fundingHigh', 'Pairs with funding ≥ 0.05%'], ['fundingLow', 'Pairs with funding ≤ −0.05%'],
];

/** The flood guard (decisions.md §16): more than this many firings of a repeating alert within FLOOD_WINDOW_S pause it. */
export const FLOOD_FIRINGS_MAX = 15;
export const FLOOD_WINDOW_S = 180;

/** The placeholders an alert's message may hold (decisions.md §16); any other is refused. */
export const MESSAGE_PLACEHOLDERS = ['exchange', 'symbol', 'type', 'event', 'direction', 'price', 'move', 'level', 'wall_usd', 'liq_usd', 'oi_change', 'funding', 'note', 'time'];

/** The bodies an alert's webhook can send (decisions.md §16): [value, words]. */
export const WEBHOOK_FORMATS = [
  ['json', 'JSON (the API\'s body)'], ['discord', 'Discord'], ['slack', 'Slack'],
];
