internal import NIOCore
internal import NIOHTTPTypes
internal import Synchronization

/// The open connections of each client address (IPv6 by its /64, as the rate limiter keys
/// them), shared by every connection of one server.
final class ConnectionCounts: Sendable {
    let limit: Int
    let exempt: [CIDR]
    private let counts = Mutex<[String: Int]>([:])

    /// At most `limit` connections per address at once; addresses in `exempt` (trusted proxies,
    /// which carry many clients' connections) are not counted.
    init(limit: Int, exempt: [CIDR]) {
        self.limit = limit
        self.exempt = exempt
    }

    /// What ``open(_:)`` decided for a new connection.
    enum Admission: Equatable {
        /// Counted under this key (release it with ``close(_:)``).
        case counted(String)
        /// From an exempt address: not counted.
        case exempt
        /// The address already holds `limit` connections: close it.
        case refused
    }

    /// Counts one more connection from `address`, if it is not exempt and there is room.
    func open(_ address: String) -> Admission {
        guard !exempt.contains(where: { $0.contains(address) }) else { return .exempt }
        let key = ClientAddress.bucket(address)
        return counts.withLock { counts in
            let open = counts[key, default: 0]
            guard open < limit else { return .refused }
            counts[key] = open + 1
            return .counted(key)
        }
    }

    /// Counts one connection of `key` closed.
    func close(_ key: String) {
        counts.withLock { counts in
            let left = counts[key, default: 1] - 1
            counts[key] = left > 0 ? left : nil
        }
    }

    /// The connections open from `address`'s bucket (tests).
    func open(from address: String) -> Int { counts.withLock { $0[ClientAddress.bucket(address)] ?? 0 } }
}

/// Closes a new connection at once when its address already holds as many as
/// ``ApplicationConfiguration/maxConnectionsPerAddress``. Before it, one address could hold 1,500
/// connections (each up to the idle timeout) and 150 MB, and with them the process's file
/// descriptors that every other client needs (red team).
final class ConnectionLimitHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart

    private let counts: ConnectionCounts
    /// The key this connection was counted under; nil when it was not counted.
    private var counted: String?

    init(counts: ConnectionCounts) { self.counts = counts }

    func handlerAdded(context: ChannelHandlerContext) {
        // An accepted connection knows its peer from the start; one that does not is not limited.
        guard let address = context.channel.remoteAddress?.ipAddress else { return }
        switch counts.open(address) {
        case .refused: context.close(promise: nil)
        case .counted(let key): counted = key
        case .exempt: break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { release() }

    private func release() {
        guard let key = counted else { return }
        counted = nil
        counts.close(key)
    }
}
