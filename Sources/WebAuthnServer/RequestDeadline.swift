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
    private var timer = CloseTimer()

    /// `deadline` is clamped to NIO's range (nanoseconds in an `Int64`), and to at least 1 ms.
    init(deadline: Duration) { self.deadline = max(.milliseconds(1), TimeAmount(deadline)) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            timer.start(context, after: deadline)
        case .end:
            timer.cancel()
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer.cancel()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { timer.cancel() }
}

/// A timer on a connection's event loop that closes the connection when it fires; at most one
/// runs at a time. Used from the connection's event loop only.
struct CloseTimer {
    private var scheduled: Scheduled<Void>?

    /// Starts the timer (cancelling one that runs): the connection is closed after `delay`.
    mutating func start(_ context: ChannelHandlerContext, after delay: TimeAmount) {
        cancel()
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        scheduled = context.eventLoop.scheduleTask(in: delay) { loopBound.value.close(promise: nil) }
    }

    /// Stops the timer, if it runs.
    mutating func cancel() {
        scheduled?.cancel()
        scheduled = nil
    }
}
