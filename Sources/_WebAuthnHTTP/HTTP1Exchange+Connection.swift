internal import Foundation
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

#if canImport(Glibc)
    import Glibc
#endif

// The connection of an ``HTTP1Exchange``: the socket, TLS over it, and every wait.
extension HTTP1Exchange {
    /// A non-blocking TCP socket, TLS over it when asked, every wait a `poll` within the
    /// exchange's idle timeout and deadline, and its cancellation.
    final class Connection {
        let fd: Int32
        let exchange: HTTP1Exchange
        var tls: TLSClientSession?
        /// When the idle timeout runs out: moved on by every byte read or written.
        var idleUntil: ContinuousClock.Instant

        private init(fd: Int32, exchange: HTTP1Exchange) {
            self.fd = fd
            self.exchange = exchange
            idleUntil = .now + .milliseconds(Int64(exchange.idle * 1000))
        }

        /// Whether the address connected to is a public one (``CappedHTTP/isPublic(_:)``).
        private(set) var peerIsPublic = false

        /// Connects to the first address of `host` that answers; with `publicOnly`, addresses that
        /// are not public are skipped (a redirect from a public host may not lead inside).
        static func open(host: String, port: Int, publicOnly: Bool = false, exchange: HTTP1Exchange) throws(WebAuthnError) -> Connection {
            let code = exchange.code
            var hints = addrinfo()
            hints.ai_family = AF_UNSPEC
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            let resolved = getaddrinfo(host, String(port), &hints, &list)
            guard resolved == 0, let first = list else {
                throw WebAuthnError(code, "\(host.prefix(64)) could not be resolved: \(String(cString: gai_strerror(resolved)))")
            }
            defer { freeaddrinfo(list) }
            var failure = "no address"
            var entry: UnsafeMutablePointer<addrinfo>? = first
            while let info = entry {
                entry = info.pointee.ai_next
                let isPublic = CappedHTTP.isPublic(info.pointee.ai_addr)
                if publicOnly && !isPublic {
                    failure = "a redirect from a public address may not lead to a loopback, private or link-local one"
                    continue
                }
                let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard fd >= 0 else { continue }
                let connection = Connection(fd: fd, exchange: exchange)
                connection.peerIsPublic = isPublic
                guard fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0 else {
                    connection.close()
                    continue
                }
                exchange.cancelled.watch(fd)
                if connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return connection }
                guard errno == EINPROGRESS else {
                    failure = String(cString: strerror(errno))
                    connection.close()
                    continue
                }
                do {
                    try connection.wait(for: Int16(POLLOUT))
                    var error: Int32 = 0
                    var size = socklen_t(MemoryLayout<Int32>.size)
                    if getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0, error == 0 { return connection }
                    failure = String(cString: strerror(error))
                    connection.close()
                } catch {
                    connection.close()
                    throw error
                }
            }
            throw WebAuthnError(code, "\(host.prefix(64)):\(port) is unreachable: \(failure)")
        }

        func close() {
            exchange.cancelled.unwatch()
            tls = nil
            Glibc.close(fd)
        }

        /// Waits until the socket is ready for `events`, within the idle timeout and the deadline.
        func wait(for events: Int16) throws(WebAuthnError) {
            while true {
                if exchange.cancelled.isCancelled { throw WebAuthnError(exchange.code, "the exchange was cancelled") }
                let now = ContinuousClock.now
                let until = min(idleUntil, exchange.deadline)
                guard now < until else {
                    throw WebAuthnError(
                        exchange.code, until == exchange.deadline ? "no complete answer within \(exchange.limit) s" : "no progress for \(exchange.idle) s")
                }
                let remaining = until - now
                let milliseconds = Int32(min(remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1, 3_600_000))
                var poller = pollfd(fd: fd, events: events, revents: 0)
                let ready = poll(&poller, 1, milliseconds)
                if ready > 0 { return }
                if ready < 0, errno != EINTR { throw WebAuthnError(exchange.code, "poll: \(String(cString: strerror(errno)))") }
            }
        }

        func startTLS(host: String, roots: [X509Certificate]?) throws(WebAuthnError) {
            let session: TLSClientSession
            do { session = try TLSClientSession(socket: fd, host: host, roots: roots) } catch { throw WebAuthnError(exchange.code, error.message) }
            tls = session
            while true {
                let step: TLSClientSession.Step
                do { step = try session.handshake() } catch { throw WebAuthnError(exchange.code, "\(host.prefix(64)): \(error.message)") }
                switch step {
                case .done: return
                case .wantRead: try wait(for: Int16(POLLIN))
                case .wantWrite: try wait(for: Int16(POLLOUT))
                case .closed: throw WebAuthnError(exchange.code, "\(host.prefix(64)) closed the connection during the TLS handshake")
                }
            }
        }

        func write(_ bytes: [UInt8]) throws(WebAuthnError) {
            var offset = 0
            while offset < bytes.count {
                let written: Int
                if let tls {
                    let attempt = bytes.withUnsafeBytes { raw in
                        Result { () throws(WebAuthnError) in try tls.write(UnsafeRawBufferPointer(rebasing: raw[offset...])) }
                    }
                    let step: TLSClientSession.Step
                    do { step = try attempt.get() } catch { throw WebAuthnError(exchange.code, error.message) }
                    switch step {
                    case .done(let n): written = n
                    case .wantRead:
                        try wait(for: Int16(POLLIN))
                        continue
                    case .wantWrite:
                        try wait(for: Int16(POLLOUT))
                        continue
                    case .closed: throw WebAuthnError(exchange.code, "the peer closed the connection while the request was sent")
                    }
                } else {
                    let n = bytes.withUnsafeBytes { raw in Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL)) }
                    if n < 0 {
                        guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                            throw WebAuthnError(exchange.code, "send: \(String(cString: strerror(errno)))")
                        }
                        try wait(for: Int16(POLLOUT))
                        continue
                    }
                    written = n
                }
                offset += written
                idleUntil = .now + .milliseconds(Int64(exchange.idle * 1000))
            }
        }

        /// Appends at most `limit` bytes to `buffer` (at least one, waiting for them); 0 at the end of the connection.
        func read(into buffer: inout [UInt8], atMost limit: Int) throws(WebAuthnError) -> Int {
            guard limit > 0 else { return 0 }
            var chunk = [UInt8](repeating: 0, count: min(limit, 64 * 1024))
            while true {
                let count: Int
                if let tls {
                    let attempt = chunk.withUnsafeMutableBytes { raw in Result { () throws(WebAuthnError) in try tls.read(into: raw) } }
                    let step: TLSClientSession.Step
                    do { step = try attempt.get() } catch { throw WebAuthnError(exchange.code, error.message) }
                    switch step {
                    case .done(let n): count = n
                    case .closed: return 0
                    case .wantRead:
                        try wait(for: Int16(POLLIN))
                        continue
                    case .wantWrite:
                        try wait(for: Int16(POLLOUT))
                        continue
                    }
                } else {
                    let n = chunk.withUnsafeMutableBytes { raw in Glibc.recv(fd, raw.baseAddress, raw.count, 0) }
                    if n < 0 {
                        guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                            throw WebAuthnError(exchange.code, "recv: \(String(cString: strerror(errno)))")
                        }
                        try wait(for: Int16(POLLIN))
                        continue
                    }
                    if n == 0 { return 0 }
                    count = n
                }
                buffer.append(contentsOf: chunk[..<count])
                idleUntil = .now + .milliseconds(Int64(exchange.idle * 1000))
                return count
            }
        }
    }
}

extension CappedHTTP {
    /// Whether a socket address is a public unicast one: not unspecified, loopback, private
    /// (10/8, 172.16/12, 192.168/16, fc00::/7), shared (100.64/10), link-local (169.254/16,
    /// fe80::/10), multicast, reserved (0/8, 240/4) or documentation-only, in IPv4 or IPv6 (an
    /// IPv4-mapped IPv6 address is judged as its IPv4 address).
    static func isPublic(_ address: UnsafePointer<sockaddr>?) -> Bool {
        guard let address else { return false }
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let raw = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr.s_addr }
            return isPublicIPv4(UInt32(bigEndian: raw))
        case AF_INET6:
            let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
            }
            return isPublicIPv6(bytes)
        default:
            return false
        }
    }

    /// ``isPublic(_:)`` for an IPv4 address in host order.
    package static func isPublicIPv4(_ a: UInt32) -> Bool {
        let blocked: [(UInt32, UInt32)] = [
            (0x0000_0000, 8), (0x0A00_0000, 8), (0x6440_0000, 10), (0x7F00_0000, 8), (0xA9FE_0000, 16), (0xAC10_0000, 12),
            (0xC000_0000, 24), (0xC000_0200, 24), (0xC0A8_0000, 16), (0xC612_0000, 15), (0xC633_6400, 24), (0xCB00_7100, 24),
            (0xE000_0000, 4), (0xF000_0000, 4),
        ]
        return !blocked.contains { network, bits in a >> (32 - bits) == network >> (32 - bits) }
    }

    /// ``isPublic(_:)`` for an IPv6 address of 16 bytes.
    package static func isPublicIPv6(_ b: [UInt8]) -> Bool {
        guard b.count == 16 else { return false }
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF {
            return isPublicIPv4(UInt32(b[12]) << 24 | UInt32(b[13]) << 16 | UInt32(b[14]) << 8 | UInt32(b[15]))
        }
        if b[0..<12].allSatisfy({ $0 == 0 }) { return false }  // ::, ::1 and ::/96 (IPv4-compatible, deprecated: ::127.0.0.1)
        if b[0] & 0xFE == 0xFC { return false }  // fc00::/7, unique local
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return false }  // fe80::/10, link-local
        if b[0] == 0xFE && b[1] & 0xC0 == 0xC0 { return false }  // fec0::/10, site-local (deprecated)
        if b[0] == 0xFF { return false }  // multicast
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return false }  // 2001:db8::/32, documentation
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B { return false }  // 64:ff9b::/96, NAT64 (reaches IPv4 inside too)
        return true
    }
}
