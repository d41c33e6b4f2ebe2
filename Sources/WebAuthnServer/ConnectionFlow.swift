internal import HTTPTypes
internal import NIOCore
internal import NIOHTTP1
internal import NIOHTTPTypes
internal import WebAuthnCore
internal import _WebAuthnEncoding

/// What a connection may ask of the server ahead of reading its answers.
///
/// - **Pipelining.** At most ``maxUnanswered`` requests may wait for their answers. A client that
///   sent 20,000 pipelined requests on a connection and read no answer held 1.6 to 2 MB of decoded
///   requests per connection, and 2.3 GB over 256 connections (red team). The request past the
///   limit is refused (`429 rate_limited`) after the answers ahead of it, and the connection
///   closed; nothing after it is read. Browsers do not pipeline.
/// - **Answers nobody reads.** A connection whose answers cannot be written for `stallTimeout`
///   (the channel stays unwritable: the kernel's send buffer and NIO's are full because the client
///   reads nothing) is closed. The idle timeout does not run while an answer is being written, and
///   the request deadline ends with the request: a client that sent 30 requests every quarter of a
///   second and read nothing held each connection, and about 4 MB of kernel memory with it, for
///   ever, and the server could not shut down while it did (red team).
/// - **`Expect: 100-continue`** is answered with `100 Continue`, so that a client waiting for it
///   sends its body at once (RFC 9110 §10.1.1). curl 7.88 took 1.01 s for a 3 KB sign-in options
///   request, 0.01 s with it. It is not sent behind a pipelined request still unanswered, where it
///   would reach the client ahead of that request's answer (the client then sends its body after
///   its own wait, as RFC 9110 lets it), nor for a declared length over `maxBodySize`, which is
///   refused (413) without the body, nor for an HTTP/1.0 request, which has no interim answers
///   (RFC 9110 §10.1.1: the expectation is ignored). A body is bounded as any other.
/// - **`Transfer-Encoding` other than `chunked` alone** is refused (`400 request_malformed`) and
///   the connection closed: the server decodes no other coding (RFC 9112 §6.1), and a proxy in
///   front may frame `identity, chunked` or `gzip, chunked` otherwise than SwiftNIO, which read
///   them as chunked (red team, fourteenth pass). Content-Length beside it, and codings NIO
///   does not know, NIO refuses itself. An HTTP/1.0 request with any `Transfer-Encoding` is refused
///   the same way: its framing is faulty (RFC 9112 §6.1), and SwiftNIO read it as chunked where a
///   proxy may frame it by its `Content-Length` alone (red team, fourteenth pass).
/// - **`Connection: close`** in any case or list, and an HTTP/1.0 request without `keep-alive`: the
///   answer says `Connection: close`, the connection closes after it, and nothing after the
///   request is read (RFC 9112 §9.3, §9.6). Hummingbird closed only on the exact value `close`.
/// - **`CONNECT` and `Upgrade`** are refused (`400 request_malformed`): the server proxies nothing
///   and switches to no other protocol, and SwiftNIO's decoder stops at such a request and kept
///   every byte that followed for a protocol handler the server does not have (red team, fifteenth
///   pass: 1 GB a second on one connection, and a crash under a memory limit).
/// - **`Host`**: an HTTP/1.1 request without one, any request with two, or one whose value is no
///   host and port, is refused (`400`; RFC 9112 §3.2); so is a request target that is neither a
///   path nor an `http`/`https` URL with a valid host and no user information, that has a
///   fragment, or that is `*` for a method other than `OPTIONS`.
/// - **An answer written before its request's body was read** (a body over the limit, an unknown
///   route) is the last one: it says `Connection: close`, and the rest of the body is dropped as
///   after any last answer (Hummingbird read it to its end, and served the next request).
/// - **A refusal** stops reading from the socket at once, waits for the answers of the requests
///   ahead of it, so that it does not overtake them, and then lingers and closes the connection
///   (`lingerThenClose`); what came after the refused request is never decoded. A request head
///   SwiftNIO cannot parse is refused the same way, with the failure body of every route
///   (Hummingbird answered a bare `400`).
final class ConnectionFlowHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The `Connection` option an answer carries.
    enum ConnectionOption: String {
        /// The connection closes after the answer.
        case close
        /// An HTTP/1.0 connection stays open (HTTP/1.1 ones do without saying).
        case keepAlive = "keep-alive"
    }

    /// `IPPROTO_TCP` and Linux's `TCP_USER_TIMEOUT` (netinet/tcp.h), which Glibc's module does not export.
    static let (ipprotoTCP, tcpUserTimeout): (SocketOptionLevel, SocketOptionName) = (6, 18)

    /// The most requests one connection may have waiting for their answers.
    static let maxUnanswered = 32

    private let stallTimeout: TimeAmount
    private let maxBodySize: Int
    /// Whether the refusals carry HSTS, as the routes' answers do.
    private let secure: Bool
    /// Between a request's head and its end, as read: a parser error there is the route's to answer.
    private var inRequest = false
    /// One entry per request whose answer has not been written to its end: the `Connection`
    /// option that answer carries (`close`, `keep-alive` for HTTP/1.0, or none).
    private var unanswered: [ConnectionOption?] = []
    /// Nothing more that is read is passed on: after a refusal, or after a request that asked to close.
    private var refusing = false
    /// A request asked to close the connection after its answer.
    private var closeRequested = false
    /// Nothing more is read from the socket: a refusal, after which the connection closes.
    private var stopped = false
    /// Runs while the channel is unwritable; closes the connection when it fires.
    private var stallTimer = CloseTimer()
    /// Runs once the last answer is written: the connection is half-closed, and what the client
    /// still sends is dropped until it fires (or the gate's byte limit closes it first).
    private var lingerTimer = CloseTimer()
    /// How long a half-closed connection is read at most: 2 s, or `stallTimeout` if shorter.
    private let linger: TimeAmount
    /// Before SwiftNIO's decoder: drops what arrives once the last answer is written.
    private let gate = DiscardGate(limit: DiscardGate.lingerLimit)
    /// A refusal waiting for the answers of the requests ahead of it.
    private var pendingRefusal: WebAuthnError?
    /// The refused request is `CONNECT`: SwiftNIO's encoder writes no body in an answer to one, of
    /// any status, so the answer says no `Content-Type` either.
    private var refusedConnect = false
    /// What the conversion to HTTPTypes drops from each request head: its version, whether it is
    /// CONNECT or has `Upgrade`, and its number of `Host` fields.
    private let tap = RequestHeadTap()

    /// `stallTimeout` is clamped to NIO's range and to at least 1 ms.
    init(stallTimeout: Duration, maxBodySize: Int, secure: Bool) {
        self.stallTimeout = max(.milliseconds(1), TimeAmount(stallTimeout))
        self.linger = min(self.stallTimeout, .seconds(2))
        self.maxBodySize = maxBodySize
        self.secure = secure
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch part {
        case .head, .end: gate.decoded(payload: nil)
        case .body(let body): gate.decoded(payload: body.readableBytes)
        }
        guard !refusing else { return }
        switch part {
        case .head(var head):
            // Every CONNECT is refused, by the pipelining limit or by `refusal(of:_:)`.
            refusedConnect = head.method == .connect
            guard unanswered.count < Self.maxUnanswered else {
                return refuse(context, WebAuthnError(.rateLimited, "more than \(Self.maxUnanswered) requests wait for their answers on this connection"))
            }
            let facts = tap.facts
            if let refusal = Self.refusal(of: head, facts) { return refuse(context, refusal) }
            if unanswered.isEmpty, facts.version != .http1_0, Self.expectsContinue(head),
                HTTP.declaredLength(head.headerFields).map({ $0 <= maxBodySize }) ?? true
            {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
            }
            inRequest = true
            let option = Self.connectionOption(head, version: facts.version)
            unanswered.append(option)
            if option == .close {
                // Hummingbird ends the connection after the answer only on exactly this value.
                closeRequested = true
                head.headerFields[.connection] = ConnectionOption.close.rawValue
                return context.fireChannelRead(wrapInboundOut(.head(head)))
            }
        case .end:
            inRequest = false
            // Nothing after a request that asked to close is read (RFC 9112 §9.6).
            if closeRequested { refusing = true }
        case .body: break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response):
            if inRequest, unanswered.count == 1, unanswered[0] != .close {
                // Answered before its body was read (a body too large, an unknown route): the
                // answer is the last one, and the rest of the body is dropped at the gate. Before,
                // Hummingbird read the refused body to its end (red team: 42 GB in 10 s, then the
                // connection served the next request).
                unanswered[0] = .close
                closeRequested = true
            }
            guard let option = unanswered.first ?? nil else { return context.write(data, promise: promise) }
            response.headerFields[.connection] = option.rawValue
            context.write(wrapOutboundOut(.head(response)), promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            let option = unanswered.isEmpty ? nil : unanswered.removeFirst()
            guard option == .close else {
                context.write(data, promise: promise)
                if unanswered.isEmpty, let refusal = pendingRefusal {
                    pendingRefusal = nil
                    answer(context, refusal)
                }
                return
            }
            // The last answer: the connection lingers once it is written.
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.cascade(to: promise)
            context.write(data, promise: written)
            written.futureResult.assumeIsolated().whenComplete { [self] _ in lingerThenClose(context) }
        }
    }

    /// Reads from the socket go on until a refusal: after it, what the client sends stays in the
    /// kernel's buffers until the refusal is written, and is then dropped at the gate.
    func read(context: ChannelHandlerContext) {
        guard !stopped else { return }
        context.read()
    }

    /// Why a request head is refused, if it is.
    static func refusal(of head: HTTPRequest, _ facts: RequestHeadTap.Facts) -> WebAuthnError? {
        if facts.upgrade {
            return WebAuthnError(.requestMalformed, "this server is no proxy and switches to no other protocol: CONNECT and Upgrade are refused")
        }
        if !framingAccepted(head) {
            return WebAuthnError(.requestMalformed, "the request's Transfer-Encoding is not chunked alone, the only coding this server reads")
        }
        if facts.version == .http1_0, head.headerFields[.transferEncoding] != nil {
            return WebAuthnError(.requestMalformed, "an HTTP/1.0 request may not carry Transfer-Encoding (RFC 9112 §6.1)")
        }
        if !facts.targetValid {
            return WebAuthnError(
                .requestMalformed,
                "the request target is neither a path nor an http or https URL with a valid host, or it has a fragment, or it is * for a method other than OPTIONS (RFC 9112 §3.2)"
            )
        }
        if facts.hosts > 1 || (facts.hosts == 0 && facts.version != .http1_0) || !facts.hostsValid {
            return WebAuthnError(.requestMalformed, "a request carries one Host field, a host and port, which only HTTP/1.0 may omit (RFC 9112 §3.2)")
        }
        return nil
    }

    /// The `Connection` option the request's answer carries: `close` for a request that asks to
    /// close the connection (a `close` option in any case, or HTTP/1.0 without `keep-alive`: RFC
    /// 9112 §9.3, §9.6), `keep-alive` for HTTP/1.0 with it, or none.
    static func connectionOption(_ head: HTTPRequest, version: HTTPVersion?) -> ConnectionOption? {
        // Options are tokens: no space or tab inside one.
        let options = head.headerFields[values: .connection].flatMap { $0.split(separator: ",") }.map {
            $0.filter { $0 != " " && $0 != "\t" }.lowercased()
        }
        if options.contains("close") { return .close }
        guard version == .http1_0 else { return nil }
        return options.contains("keep-alive") ? .keepAlive : .close
    }

    /// A request head SwiftNIO could not parse gets the failure body of every route (Hummingbird
    /// answered a bare `400`), after the answers of the requests ahead of it; the connection then
    /// closes. A parser error inside a body goes on to the route reading it, which answers it; that
    /// answer says `Connection: close`, nothing more is read, and the connection closes after it.
    /// After the request's answer, the error is not passed on.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Input the decoder consumed without producing anything (the gate's limit): in a body, as
        // a malformed body; before a request's head, as a head too large.
        let undecoded: HTTPParserError? = error is DiscardGate.UndecodedInput ? (inRequest ? .invalidChunkSize : .headerOverflow) : nil
        guard let parsing = undecoded ?? error as? HTTPParserError else { return context.fireErrorCaught(error) }
        guard !inRequest else {
            refusing = true
            stopped = true
            guard !unanswered.isEmpty else {
                // The route answered without reading the body: that answer stays the only one
                // (Hummingbird, draining the body, answered a bare `400` after it).
                return lingerThenClose(context)
            }
            unanswered[unanswered.count - 1] = .close
            // As the parser error (the gate's own error is no SwiftNIO one), for the route to answer.
            return context.fireErrorCaught(parsing)
        }
        guard !refusing else { return }
        refuse(context, Self.failure(parsing))
    }

    /// The failure a parser error in a request head is answered with.
    static func failure(_ error: HTTPParserError) -> WebAuthnError {
        if error == .headerOverflow {
            return WebAuthnError(.inputTooLarge, "the request's head is larger than this server reads")
        }
        return WebAuthnError(.requestMalformed, "the request is not well-formed HTTP/1.1: \(reason(error))")
    }

    /// What a parser error says, in the server's own words: SwiftNIO's text names its parser and
    /// its states (`paused (swift-http-parser error)` for an HTTP/2 preface; red team, round 26).
    static func reason(_ error: HTTPParserError) -> String {
        switch error {
        // llhttp knows a fixed list of methods, by case: `get` is a token, and refused as unknown
        // (red team, round 27: the answer called it no token).
        case .invalidMethod: return "the method is not one this server knows (methods are case-sensitive)"
        case .invalidURL, .invalidHost, .invalidPort, .invalidPath, .invalidQueryString, .invalidFragment: return "the request target is malformed"
        case .invalidVersion: return "the version is not HTTP/1.0 or HTTP/1.1"
        case .invalidContentLength, .unexpectedContentLength:
            return "Content-Length is malformed, given twice, or beside Transfer-Encoding"
        case .invalidChunkSize: return "the chunked body is malformed"
        case .invalidHeaderToken, .invalidCharactersUsed, .lfExpected, .invalidConstant: return "a line or a field of the head is malformed"
        default: return "the request cannot be parsed"
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { stallTimer.cancel() } else { stallTimer.start(context, after: stallTimeout) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stallTimer.cancel()
        lingerTimer.cancel()
        context.fireChannelInactive()
    }

    /// Puts the tap between SwiftNIO's request decoder and the conversion to HTTPTypes; a pipeline
    /// where that fails (another server stack) closes every connection rather than read requests
    /// unchecked.
    func handlerAdded(context: ChannelHandlerContext) {
        do {
            let pipeline = context.pipeline.syncOperations
            try pipeline.addHandler(tap, position: .after(pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)))
            try pipeline.addHandler(gate, position: .first)
            // The kernel gives up on a connection whose sent data has not been acknowledged (or
            // whose peer has shown a zero window) for `stallTimeout`: answers left in the kernel
            // after the connection closed, for a client that reads nothing, were held for minutes
            // (red team, sixteenth pass: 488 KB from a 1.1 KB request, still there after 230 s).
            let milliseconds = Int(clamping: stallTimeout.nanoseconds / 1_000_000)
            try? context.channel.syncOptions?.setOption(.socket(Self.ipprotoTCP, Self.tcpUserTimeout), value: milliseconds)
        } catch {
            refusing = true
            stopped = true
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stallTimer.cancel()
        lingerTimer.cancel()
    }

    /// Whether the request's `Transfer-Encoding`, if any, is one field of `chunked`, in any case
    /// (a list, `chunked;x=y` or a second field is refused).
    static func framingAccepted(_ head: HTTPRequest) -> Bool {
        let codings = head.headerFields[values: .transferEncoding]
        return codings.isEmpty || (codings.count == 1 && codings[0].lowercased() == "chunked")
    }

    /// Reads nothing more, answers `error` (`400`, the failure body of every route) once the
    /// requests ahead have their answers, and closes the connection.
    private func refuse(_ context: ChannelHandlerContext, _ error: WebAuthnError) {
        refusing = true
        stopped = true
        if unanswered.isEmpty { answer(context, error) } else { pendingRefusal = error }
    }

    /// After the last answer is written: nothing more is processed, the client gets an end of
    /// input after the answer (the connection is half-closed), and what it still sends is dropped
    /// before SwiftNIO's decoder, for `linger` and ``DiscardGate/lingerLimit`` bytes at most; then
    /// the connection closes. Closing at once with input unread made the kernel answer with a
    /// reset, which can cost the client the answer it had not read yet (a browser sending a head
    /// too large for its `413`); reading on without a bound cost 170 GiB in 30 s (red team,
    /// fifteenth pass).
    private func lingerThenClose(_ context: ChannelHandlerContext) {
        refusing = true
        gate.discarding = true
        context.close(mode: .output, promise: nil)  // fails harmlessly when Hummingbird did it already
        lingerTimer.start(context, after: linger)
        if stopped {
            stopped = false
            context.read()
        }
    }

    /// Writes the refusal `error`, then lingers and closes the connection.
    private func answer(_ context: ChannelHandlerContext, _ error: WebAuthnError) {
        let body = context.channel.allocator.buffer(bytes: JSONValue.object(HTTP.failure(error)).serializedBytes())
        var response = HTTPResponse(status: HTTP.status(for: error))
        if !refusedConnect { response.headerFields[.contentType] = "application/json" }
        SecurityHeaders.apply(to: &response.headerFields, secure: secure)
        response.headerFields[.contentLength] = String(body.readableBytes)
        response.headerFields[.connection] = ConnectionOption.close.rawValue
        context.write(wrapOutboundOut(.head(response)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { [self] _ in lingerThenClose(context) }
    }

    /// Whether the request asks for `100 Continue`: an `Expect` field of `100-continue`, in any case.
    static func expectsContinue(_ head: HTTPRequest) -> Bool {
        head.headerFields[values: .expect].contains { $0.lowercased() == "100-continue" }
    }
}
