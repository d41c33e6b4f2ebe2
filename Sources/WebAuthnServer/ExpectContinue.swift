internal import HTTPTypes
internal import NIOCore
internal import NIOHTTPTypes

/// Answers `Expect: 100-continue` with `100 Continue`, so that a client waiting for it sends its
/// body at once (RFC 9110 §10.1.1). Without it, a client that sends the expectation waits for
/// its own timeout before sending the body: curl 7.88 took 1.01 s for a 3 KB sign-in options
/// request, 0.01 s with this handler. The body is then bounded as any other: by the route's
/// size limit and the request deadline. Any other expectation is left to the routes, which ignore it.
final class ExpectContinueHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Requests whose answer has not been written to its end. A `100 Continue` goes out only when
    /// none is before it: behind a pipelined request it would reach the client ahead of that
    /// request's answer, as if it were that request's. Then the client sends its body after its own
    /// wait, as RFC 9110 lets it.
    private var unanswered = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            if unanswered == 0, Self.expectsContinue(head) {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
            }
            unanswered += 1
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { unanswered = max(0, unanswered - 1) }
        context.write(data, promise: promise)
    }

    /// Whether the request asks for `100 Continue`: an `Expect` field of `100-continue`, in any case.
    static func expectsContinue(_ head: HTTPRequest) -> Bool {
        head.headerFields[values: .expect].contains { $0.lowercased() == "100-continue" }
    }
}
