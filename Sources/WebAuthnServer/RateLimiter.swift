package import Foundation
internal import Hummingbird
internal import NIOCore
internal import Synchronization
internal import WebAuthnCore

#if canImport(Glibc)
    import Glibc
    internal import WebAuthnMetadata
    internal import _WebAuthnEncoding
    internal import _WebAuthnCrypto
#endif

/// Token buckets keyed by client address or session, on the engine's clock.
///
/// Bounded: past `maxTracked` buckets, the ones that have refilled (they hold no state a new bucket
/// would not) are dropped in one sweep, down to nine tenths of the bound; only when that is not
/// enough are the oldest-inserted dropped. A flood of new keys therefore cannot push out a
/// throttled client's bucket while idle ones remain (red team: a throttled address came back with a
/// full bucket after the limiter had seen `maxTracked` other keys). Amortized O(1) per request: a
/// sweep reads every bucket, and the next one comes a tenth of the bound later at the earliest.
package final class RateLimiter: Sendable {
    struct Bucket {
        var tokens: Double
        var updated: Date
        /// Takes refused since the last one allowed (``admit(_:rate:burst:now:)`` reports it).
        var refused = 0
        /// When the bucket holds `burst` tokens again, if nothing is taken.
        var full: Date

        /// Moves the bucket to `now`: `tokens` plus what `rate` refilled since, `change` added (a
        /// take is -1, a give-back +1) after the refill, never past `burst`.
        mutating func advance(to now: Date, rate: Double, burst: Double, change: Double = 0) {
            tokens = min(burst, min(burst, tokens + max(0, now.timeIntervalSince(updated)) * rate) + change)
            updated = now
            full = now.addingTimeInterval(max(0, burst - tokens) / rate)
        }
    }
    private struct State {
        var buckets: [String: Bucket] = [:]
        /// The keys in insertion order (only ``shrink(_:now:to:)`` removes buckets, and rebuilds it).
        var order: [String] = []
    }
    private let state = Mutex(State())
    let maxTracked: Int

    package init(maxTracked: Int) { self.maxTracked = max(1, maxTracked) }

    /// Takes one token from `key`'s bucket (rate per second, burst = ten
    /// seconds of rate). Returns nil when allowed, else the seconds to wait.
    func take(_ key: String, rate: Double, now: Date, burst explicitBurst: Double? = nil) -> Int? {
        let (allowed, bucket) = takeToken(key, rate: rate, burst: explicitBurst ?? rate * 10, now: now)
        return allowed ? nil : max(1, Int(((1 - bucket.tokens) / rate).rounded(.up)))
    }

    /// Takes one token from `key`'s bucket, as ``take(_:rate:now:burst:)`` does, for work that is
    /// skipped when refused (a log line): nil when refused (counted), else how many were refused
    /// since the last one allowed.
    package func admit(_ key: String, rate: Double, burst: Double, now: Date) -> Int? {
        let (allowed, bucket) = takeToken(key, rate: rate, burst: burst, now: now)
        return allowed ? bucket.refused : nil
    }

    /// One take: whether it was allowed, and the bucket as it was before the refusals were reset.
    private func takeToken(_ key: String, rate: Double, burst: Double, now: Date) -> (Bool, Bucket) {
        state.withLock { s in
            var bucket =
                s.buckets[key]
                ?? {
                    s.order.append(key)
                    return Bucket(tokens: burst, updated: now, full: now)
                }()
            bucket.advance(to: now, rate: rate, burst: burst)
            let allowed = bucket.tokens >= 1
            let seen = bucket
            if allowed {
                bucket.advance(to: now, rate: rate, burst: burst, change: -1)
                bucket.refused = 0
            } else {
                bucket.refused += 1
            }
            s.buckets[key] = bucket
            if s.buckets.count > maxTracked { Self.shrink(&s, now: now, to: max(1, maxTracked - maxTracked / 10)) }
            return (allowed, seen)
        }
    }

    /// Drops the refilled buckets, then, if that was not enough, the oldest-inserted, until at most
    /// `target` remain; the order is rebuilt without the dropped keys.
    private static func shrink(_ s: inout State, now: Date, to target: Int) {
        s.buckets = s.buckets.filter { $0.value.full > now }
        var order = s.order.filter { s.buckets[$0] != nil }
        let excess = max(0, s.buckets.count - target)
        for key in order.prefix(excess) { s.buckets.removeValue(forKey: key) }
        order.removeFirst(excess)
        s.order = order
    }

    /// Adds `count` to the refusals `key`'s bucket reports next (``admit(_:rate:burst:now:)``):
    /// for work another budget refused after this one had allowed it.
    package func addRefused(_ key: String, _ count: Int) {
        guard count > 0 else { return }
        state.withLock { s in s.buckets[key]?.refused += count }
    }

    /// Puts back one token taken from `key`'s bucket (never past `burst`): what was held for an
    /// attempt that did not fail.
    func giveBack(_ key: String, rate: Double, burst: Double, now: Date) {
        state.withLock { s in
            s.buckets[key]?.advance(to: now, rate: rate, burst: burst, change: 1)
        }
    }

    /// Whether `key`'s bucket holds less than one token now (a bucket never used is full).
    func isEmpty(_ key: String, now: Date, rate: Double) -> Bool {
        state.withLock { s in
            guard let bucket = s.buckets[key] else { return false }
            return bucket.tokens + max(0, now.timeIntervalSince(bucket.updated)) * rate < 1
        }
    }

    var count: Int { state.withLock { $0.buckets.count } }
}

/// An IPv4 or IPv6 address range, such as `10.0.0.0/8` or `::1/128`.
public struct CIDR: Sendable, Equatable, CustomStringConvertible {
    let network: [UInt8]
    let prefix: Int
    /// The range as it was written.
    public let description: String

    /// Whether the range holds every address of its family (`/0`, however written, `::ffff:0:0/96`
    /// among them): a trusted-proxy range that lets any client pose as any address.
    package var holdsEveryAddress: Bool { prefix == 0 }

    /// Parses `ADDRESS/PREFIX` (or a bare address: a single host).
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
        guard let address = parts.first, let bytes = CIDR.bytes(address) else { return nil }
        let bits = bytes.count * 8
        let prefix = parts.count == 2 ? Int(parts[1]) : bits
        guard let prefix, (0...bits).contains(prefix) else { return nil }
        // An IPv4-mapped range (::ffff:127.0.0.1/128) is the IPv4 range it maps, so that it matches
        // IPv4 peers too (red team, fortieth pass: it never matched 127.0.0.1).
        if bytes.count == 16, prefix >= 96, bytes.starts(with: CIDR.ipv4MappedPrefix) {
            self.network = Array(bytes[12...])
            self.prefix = prefix - 96
        } else {
            self.network = bytes
            self.prefix = prefix
        }
        self.description = text
    }

    /// Whether `address` (textual) is in the range.
    public func contains(_ address: String) -> Bool {
        guard var bytes = CIDR.bytes(address) else { return false }
        // An IPv4-mapped IPv6 address (::ffff:a.b.c.d) matches IPv4 ranges.
        if bytes.count == 16, network.count == 4, bytes.starts(with: CIDR.ipv4MappedPrefix) {
            bytes = Array(bytes[12...])
        }
        guard bytes.count == network.count else { return false }
        var remaining = prefix
        for i in 0..<bytes.count where remaining > 0 {
            let take = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xff << (8 - take))
            if bytes[i] & mask != network[i] & mask { return false }
            remaining -= take
        }
        return true
    }

    /// The first 12 bytes of an IPv4-mapped IPv6 address, ::ffff:0:0/96 (RFC 4291 §2.5.5.2).
    static let ipv4MappedPrefix: [UInt8] = [UInt8](repeating: 0, count: 10) + [0xff, 0xff]

    /// The 4 or 16 bytes of a textual IP address.
    static func bytes(_ text: String) -> [UInt8]? {
        guard text.utf8.count <= 64, !text.utf8.contains(0) else { return nil }  // inet_pton would stop at a NUL
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}

enum ClientAddress {
    /// The throttling key of an address: IPv6 addresses by their /64 (one
    /// subscriber usually has a whole /64), IPv4 addresses whole.
    static func bucket(_ address: String) -> String {
        guard let bytes = CIDR.bytes(address), bytes.count == 16 else { return address }
        if bytes.starts(with: CIDR.ipv4MappedPrefix) { return bytes[12...].map(String.init).joined(separator: ".") }
        // The /64 in RFC 5952's form for its first four groups (red team, fortieth pass: one group a
        // byte, `20:1:d:b8::/64` for 2001:db8::/64, which no tool reads as that network).
        return stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }.joined(separator: ":") + "::/64"
    }

    /// The client's address: the socket peer, or, when the peer is a trusted
    /// proxy, the right-most `X-Forwarded-For` entry that is not one.
    static func of(_ request: Request, peer: SocketAddress?, trustedProxies: [CIDR]) -> String {
        let socket = peer?.ipAddress ?? "unknown"
        guard !trustedProxies.isEmpty, trustedProxies.contains(where: { $0.contains(socket) }) else { return socket }
        let forwarded = request.headers[values: .init("X-Forwarded-For")!]
            .flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        for entry in forwarded.reversed().prefix(32) {
            guard let hop = address(entry) else { return socket }  // garbage: believe the socket
            if !trustedProxies.contains(where: { $0.contains(hop) }) { return hop }
        }
        return socket
    }

    /// The address of one `X-Forwarded-For` entry: an IPv4 or IPv6 address, with the port some
    /// load balancers add (`203.0.113.9:41234`, `[2001:db8::1]:41234`, `[2001:db8::1]`); nil for
    /// anything else. Red team, thirteenth pass: entries with a port were garbage, so every client
    /// behind such a proxy shared the proxy's own throttle.
    static func address(_ entry: String) -> String? {
        if CIDR.bytes(entry) != nil { return entry }
        var host = Substring(entry), port: Substring = ""
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            port = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            guard CIDR.bytes(String(host))?.count == 16 else { return nil }
        } else if let colon = host.firstIndex(of: ":"), host.lastIndex(of: ":") == colon {
            port = host[colon...]
            host = host[..<colon]
            guard CIDR.bytes(String(host))?.count == 4 else { return nil }
        } else {
            return nil
        }
        if !port.isEmpty {
            let digits = port.dropFirst()
            guard port.first == ":", (1...5).contains(digits.utf8.count), digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        }
        return String(host)
    }
}
