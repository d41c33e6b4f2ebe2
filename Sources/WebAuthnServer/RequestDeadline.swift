internal import NIOCore
internal import NIOHTTPTypes

/// Closes a connection whose request has not arrived whole within `deadline` of its head.
///
/// The idle timeout only closes a connection that sends nothing: a client that sends a byte
/// of body every few seconds kept it open for ever, and one address held 1,500 such
/// connections and 150 MB (red team). This handler gives each request a deadline from its
/// head. A request still arriving when its deadline passes gets no answer; the connection is
/// closed.
///
/// One check per connection runs on its event loop (no task, no thread hop). It is not
/// cancelled at a request's end and scheduled again at the next head (two operations on the
/// loop's timer heap per request, about 1 % of the server's CPU under load): a request only
/// records when it is due, and the check, when it fires, closes the connection if the request
/// being read is past due, waits for that request's due time if it is not, and stops if none is
/// being read (the next head starts it again). So a connection's check fires at most once per
/// `deadline` while requests keep coming, and always at the due time of the request it closes.
final class RequestDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let deadline: TimeAmount
    /// When the request being read must have arrived whole; nil between requests.
    private var due: NIODeadline?
    /// The check, while one is scheduled.
    private var check: Scheduled<Void>?
    /// How many times a check was scheduled (for tests: not once per request).
    private(set) var checksScheduled = 0

    /// `deadline` is clamped to NIO's range (nanoseconds in an `Int64`), and to at least 1 ms.
    init(deadline: Duration) { self.deadline = max(.milliseconds(1), TimeAmount(deadline)) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            let due = context.eventLoop.now + deadline
            self.due = due
            if check == nil { schedule(context, at: due) }
        case .end:
            due = nil
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    private func schedule(_ context: ChannelHandlerContext, at time: NIODeadline) {
        checksScheduled += 1
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleTask(deadline: time) {
            let (handler, context) = bound.value
            handler.fired(context)
        }
    }

    private func fired(_ context: ChannelHandlerContext) {
        check = nil
        guard let due else { return }
        if context.eventLoop.now >= due {
            self.due = nil
            context.close(promise: nil)
        } else {
            schedule(context, at: due)
        }
    }

    private func stop() {
        check?.cancel()
        check = nil
        due = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { stop() }
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
