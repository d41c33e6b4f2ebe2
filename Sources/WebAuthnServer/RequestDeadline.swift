internal import NIOCore
internal import NIOHTTPTypes

/// Closes a connection whose request has not arrived whole within `deadline` of its head.
///
/// The idle timeout only closes a connection that sends nothing: a client that sends a byte
/// of body every few seconds kept it open for ever, and one address held 1,500 such
/// connections and 150 MB (red team). This handler gives each request a deadline from its
/// head: the timer runs on the connection's event loop (no task, no thread hop) and is
/// cancelled by the request's end. A request still arriving when it fires gets no answer;
/// the connection is closed.
final class RequestDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let deadline: TimeAmount
    private var timer: Scheduled<Void>?

    /// `deadline` is clamped to NIO's range (nanoseconds in an `Int64`), and to at least 1 ms.
    init(deadline: Duration) { self.deadline = max(.milliseconds(1), TimeAmount(deadline)) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            timer?.cancel()
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(in: deadline) { loopBound.value.close(promise: nil) }
        case .end:
            timer?.cancel()
            timer = nil
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }
}
