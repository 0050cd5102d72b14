// Package search is petrel's NIP-50 text analysis: the tokenizer, the
// parser of search strings (with NIP-50 extensions stripped), the choice of
// what text of an event is searchable, and BM25 scoring. It does no I/O and
// holds no index: the index lives in the store (internal/store/pebble keeps
// a posting list per term next to the events, updated in the same batch),
// and the store's naive model (internal/store/storetest) uses this package
// to decide what matches.
//
// # What is searchable
//
// An event's searchable text is, in this order (which matters only when an
// event is longer than MaxDocTokens tokens: the rest is not indexed):
//
//   - the values of its "title" and "subject" tags (weight 2) and "summary"
//     tags (weight 1), for every kind (NIP-23 long-form, NIP-52 calendar,
//     NIP-51 sets, NIP-14 subjects);
//   - the values of its "t" tags (hashtags, weight 2), for every kind;
//   - its content, depending on the kind: for kind 0 (profiles) and kinds
//     40 and 41 (NIP-28 channels) the JSON object's "name", "display_name"
//     and "displayName" (weight 2) and "about" and "nip05" (weight 1); no
//     content for kinds whose content is not text meant for people
//     (see ContentIndexed: contact lists, encrypted messages, reposts,
//     reactions, deletions, requests to vanish, seals, gift wraps, and the
//     NIP-51 lists and sets whose content holds encrypted items); the
//     content as text (weight 1) for every other kind.
//
// A weight of 2 counts each token twice in the term frequency and in the
// document length: a word in a title or a hashtag weighs as much as the
// same word twice in the content (BM25 with field boosts folded into the
// term frequency).
//
// # Tokens
//
// Text is split on anything that is not a letter, a digit or a combining
// mark, and lowercased (Unicode simple folding; full-width ASCII is mapped
// to ASCII; there is no stemming and no accent folding). An apostrophe
// between two letters is dropped, so "don't" is the token "dont". Tokens of
// one character and the English stopwords of Stopwords are dropped, and so
// are tokens longer than MaxWordLen bytes (hex ids, base64 and other blobs
// are not words). Runs of Han, Hiragana, Katakana and Hangul characters,
// which do not separate words with spaces, are indexed as overlapping
// character bigrams ("東京都" gives "東京" and "京都"; a lone character is
// its own token), so a query for any two-character word finds it.
//
// URLs (http, https, ws, wss) are reduced to the words of their host name,
// without "www." ("https://www.example.com/a/b?c" gives "example" and
// "com"): the path and query are noise for search. A NIP-21 "nostr:" URI is
// reduced to its bech32 entity ("nostr:npub1..." gives "npub1..."), which
// is kept whole up to MaxTermLen bytes, bare or not; an nsec entity is never
// indexed.
//
// # Queries
//
// A search string is split on white space. A "key:value" word whose key is
// a NIP-50 extension (include, domain, language, sentiment, nsfw) is
// removed and reported in Query.Extensions; petrel ignores them. A word
// that has the shape of an extension petrel does not know (a key of
// ASCII letters, digits, "_" or "-" starting with a letter, a colon, and a
// value, and not a URL or a nostr: URI) is removed too, as NIP-50 asks
// ("relays SHOULD ignore extensions they don't support"), and reported in
// Query.Ignored. The rest goes through the tokenizer; the first
// MaxQueryTerms distinct terms are the query's terms. An event matches when
// every term is among its terms (AND); matches are ranked by BM25. There
// are no operators: quotes, "-" and "OR" are ordinary punctuation and words.
//
// Changing anything above changes what is indexed: Version must then
// change, so that stores rebuild their index.
package search
