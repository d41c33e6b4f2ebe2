internal import NIOCore
internal import NIOHTTP1

/// Records what ``ConnectionFlowHandler`` needs of each request head as SwiftNIO decoded it, and
/// the conversion to HTTPTypes drops; the handler reads it when the same head reaches it
/// converted (synchronously, on the same event loop).
final class RequestHeadTap: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    struct Facts {
        var version: HTTPVersion?
        /// CONNECT, or an `Upgrade` field: SwiftNIO's decoder stops at such a request and keeps
        /// what follows for a protocol handler this server does not have.
        var upgrade = false
        /// How many `Host` fields the head has.
        var hosts = 0
        /// Whether every `Host` value is one RFC 3986 allows: `uri-host [":" port]` (RFC 9112 §3.2).
        var hostsValid = true
        /// Whether the request target is a path (origin-form), `*` for `OPTIONS`, or an `http`/`https` URL
        /// whose authority is a valid host and port without user information (absolute-form).
        var targetValid = true
    }

    /// Whether `target` is origin-form, `*` for `OPTIONS`, or absolute-form with a scheme of
    /// `http` or `https` and an authority that is a valid `Host` value, not empty and without user
    /// information (red team: `http://user:pw@evil/`, `http://a%zz/` and `https://evil:99999/`
    /// were served). No form has a fragment (RFC 9112 §3.2), and only `OPTIONS` takes `*` (§3.2.4):
    /// `GET /#x` and `GET *` were answered 404.
    static func isTargetValid(_ target: String, method: HTTPMethod) -> Bool {
        if target.utf8.contains(UInt8(ascii: "#")) { return false }
        if target == "*" { return method == .OPTIONS }
        if target.hasPrefix("/") { return true }
        let lower = target.lowercased()
        guard let scheme = ["http://", "https://"].first(where: lower.hasPrefix) else { return false }
        let rest = target.dropFirst(scheme.count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        // RFC 9110 §4.2.1: an http URI with an empty host is invalid (`http://:80/`).
        return !authority.isEmpty && !authority.hasPrefix(":") && HostField.isValid(String(authority))
    }

    /// Those of the latest request head.
    private(set) var facts = Facts()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            let hosts = head.headers["host"]
            facts = Facts(
                version: head.version, upgrade: head.method == .CONNECT || head.headers.contains(name: "upgrade"), hosts: hosts.count,
                hostsValid: hosts.allSatisfy(HostField.isValid), targetValid: Self.isTargetValid(head.uri, method: head.method))
        }
        context.fireChannelRead(data)
    }
}

/// The first handler of a connection: passes bytes on until ``discarding``, then drops them, and
/// stops reading once more than `limit` bytes have been dropped (the linger timer then closes the
/// connection). What a client honestly still sends after its last answer (the rest of a refused
/// request) is under a request head's and a body's limits. Closing at the limit instead would
/// throw away the answers still in the kernel's send queue (red team: 8 of 32 pipelined answers
/// arrived in up to 40 % of trials).
final class DiscardGate: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = Never

    /// What a lingering connection may send before it is closed: 1 MiB.
    static let lingerLimit = 1 << 20

    /// The most bytes of a request, or before one, that the decoder may consume beyond the body
    /// it produces: the head (SwiftNIO reads 80 KB at most) and the chunked framing of a body
    /// within the limits (a 64 KiB body in one-byte chunks frames it with about 330 KB). Blank
    /// lines before a request line, chunk extensions and leading zeros of a chunk size produce
    /// nothing, and were read at line rate: 46 GB in 30 s before a request, 17 GB in 10 s inside a
    /// body (red team, sixteenth pass), and with a 1-byte chunk after each 200 KB of extension,
    /// 6.7 GB in 5 s when every part started the count again (its re-check).
    static let undecodedLimit = 1 << 20

    /// Fired when ``undecodedLimit`` is passed; what follows is dropped.
    struct UndecodedInput: Error {}

    private let limit: Int
    private var dropped = 0
    /// Bytes passed on in this request (or since the last one ended) beyond the body produced.
    private var undecoded = 0
    /// Whether what arrives is dropped.
    var discarding = false

    init(limit: Int) { self.limit = limit }

    /// The decoder produced a request part: a head or an end (nil: the count starts again), or
    /// `payload` bytes of body, which are not framing.
    func decoded(payload: Int?) { undecoded = payload.map { max(0, undecoded - $0) } ?? 0 }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let count = unwrapInboundIn(data).readableBytes
        guard discarding else {
            undecoded += count
            context.fireChannelRead(data)
            if undecoded > Self.undecodedLimit, !discarding {
                discarding = true
                context.fireErrorCaught(UndecodedInput())
            }
            return
        }
        dropped += count
    }

    /// Reads stop once the limit is passed.
    func read(context: ChannelHandlerContext) {
        guard dropped <= limit else { return }
        context.read()
    }

    /// The client's end of input while lingering: nothing more will come, so the connection closes.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if discarding, let event = event as? ChannelEvent, event == .inputClosed { return context.close(promise: nil) }
        context.fireUserInboundEventTriggered(event)
    }
}
