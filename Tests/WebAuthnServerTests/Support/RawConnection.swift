import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A plain TCP connection to a loopback port, for requests a URL session will not send
/// (trickled, pipelined, malformed). Blocking, with a receive timeout.
final class RawConnection: @unchecked Sendable {
    private let fd: Int32

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A connection to `port`; `receiveBuffer`: the socket's receive buffer in bytes, set before
    /// connecting (a small one makes the server's answers back up sooner).
    init(port: Int, receiveBuffer: Int32? = nil) throws {
        signal(SIGPIPE, SIG_IGN)
        fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed: \(errno)") }
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr = in_addr(s_addr: inet_addr("127.0.0.1"))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else {
            Glibc.close(fd)
            throw Failure(description: "connect() failed: \(errno)")
        }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw Failure(description: "send() failed: \(errno)") }
    }

    /// What the server sent, up to 64 KiB, once something arrived (or the timeout passed).
    func receive() throws -> String {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { throw Failure(description: "recv() returned \(count), errno \(errno)") }
        return String(decoding: buffer.prefix(count), as: UTF8.self)
    }

    /// What the server sent, if anything arrives within `seconds` (polled, without blocking a thread).
    func receive(within seconds: Double) async -> String? {
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while Date() < deadline {
            let count = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 { return String(decoding: buffer.prefix(count), as: UTF8.self) }
            if count == 0 { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// Whether the server has closed the connection (a read returns end of file at once).
    func closedByPeer() -> Bool {
        var byte: UInt8 = 0
        let count = Glibc.recv(fd, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK))
        return count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// Reads until the server closes (end of file) or nothing arrives for the receive timeout:
    /// how many times `marker` occurred, and whether the server closed.
    func drain(counting marker: String) -> (count: Int, closed: Bool) {
        let (text, closed) = drain()
        return (text.components(separatedBy: marker).count - 1, closed)
    }

    /// Reads until the server closes (end of file) or nothing arrives for the receive timeout:
    /// everything received, and whether the server closed.
    func drain() -> (text: String, closed: Bool) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var received: [UInt8] = []
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return (String(decoding: received, as: UTF8.self), count == 0) }
            received += buffer.prefix(count)
        }
    }

    /// The connection's local port.
    var localPort: Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { Glibc.close(fd) }
}
