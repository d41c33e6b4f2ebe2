import Foundation
import WebAuthnCore
#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP proxy on 127.0.0.1 that answers `CONNECT` only, as an egress proxy does, and relays
/// bytes both ways to the port asked for (on 127.0.0.1 whatever the name asked for: tests stay on
/// loopback). It records each request head. Test code only.
final class ConnectProxy: @unchecked Sendable {
    enum Mode: Sendable {
        /// `200`, then the tunnel.
        case tunnel
        /// This status and no tunnel.
        case refuse(Int)
        /// `200` with bytes after the head (a proxy that cannot be trusted with the tunnel).
        case dataAfterHead
        /// These bytes as they are, then the connection's end (a malformed or endless answer).
        case raw([UInt8])
    }

    var port: Int { listener.port }
    private let listener: LoopbackListener
    private let mode: Mode
    /// The `Proxy-Authorization` value asked for: without it, `407`.
    private let authorization: String?
    private let received = Locked<[String]>([])

    /// The request heads received so far.
    var heads: [String] { received.withLock { $0 } }

    init(mode: Mode = .tunnel, authorization: String? = nil) throws {
        self.mode = mode
        self.authorization = authorization
        listener = try LoopbackListener()
        listener.start { [self] connection in serve(connection) }
    }

    func stop() { listener.stop() }

    private func send(_ text: String, to fd: Int32) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head: [UInt8] = []
        var byte: UInt8 = 0
        // Byte by byte, so nothing of the tunnel is read with the head.
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
            guard head.count < 16 * 1024, recv(client, &byte, 1, 0) == 1 else { return }
            head.append(byte)
        }
        let text = String(decoding: head, as: UTF8.self)
        received.withLock { $0.append(text) }
        let lines = text.components(separatedBy: "\r\n")
        let request = lines[0].split(separator: " ")
        guard request.count == 3, request[0] == "CONNECT", let colon = request[1].lastIndex(of: ":"),
            let port = UInt16(request[1][request[1].index(after: colon)...])
        else { return send("HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n", to: client) }
        if let authorization, !lines.contains(where: { $0.lowercased() == "proxy-authorization: \(authorization.lowercased())" }) {
            return send("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n", to: client)
        }
        switch mode {
        case .refuse(let status): return send("HTTP/1.1 \(status) Refused\r\nContent-Length: 0\r\n\r\n", to: client)
        case .dataAfterHead: return send("HTTP/1.1 200 Connection established\r\n\r\n\u{16}\u{3}\u{3}junk", to: client)
        case .raw(let bytes):
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes { Glibc.send(client, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
                guard written > 0 else { return }
                offset += written
            }
            return
        case .tunnel: break
        }
        let upstream = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(upstream) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr = in_addr(s_addr: inet_addr("127.0.0.1"))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { return send("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n", to: client) }
        send("HTTP/1.1 200 Connection established\r\n\r\n", to: client)
        relay(client, upstream)
    }

    /// Copies bytes both ways until either side ends (or 10 s pass without any).
    private func relay(_ a: Int32, _ b: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
        while poll(&fds, 2, 10_000) > 0 {
            for (i, entry) in fds.enumerated() where entry.revents != 0 {
                let n = recv(entry.fd, &buffer, buffer.count, 0)
                guard n > 0 else { return }
                let to = i == 0 ? b : a
                var offset = 0
                while offset < n {
                    let written = buffer.withUnsafeBytes { Glibc.send(to, $0.baseAddress! + offset, n - offset, Int32(MSG_NOSIGNAL)) }
                    guard written > 0 else { return }
                    offset += written
                }
            }
            for i in fds.indices { fds[i].revents = 0 }
        }
    }
}
