import CoreMetrics
import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Testing

@testable import WebAuthnServer

/// Work the server does on every request, kept off the per-request path (issue 13), with the
/// behaviour it had when it was done per request.
@Suite("Per-request costs: the request deadline's check, the ceremony metrics' handles")
struct HandlerCostTests {
    static let head = HTTPRequestPart.head(HTTPRequest(method: .post, scheme: nil, authority: "a", path: "/assertion/options"))

    /// A connected channel with only `handler` in its pipeline, on a loop whose time the test moves.
    static func connected(_ handler: RequestDeadlineHandler) throws -> (EmbeddedEventLoop, EmbeddedChannel) {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(handler: handler, loop: loop)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (loop, channel)
    }

    @Test("the request deadline: one check scheduled for many requests, each request closed at its own due time")
    func requestDeadline() throws {
        let handler = RequestDeadlineHandler(deadline: .seconds(2))
        let (loop, channel) = try Self.connected(handler)
        // 100 requests, each whole within its deadline, 10 ms apart: one check is scheduled
        // (before, one per request, cancelled at its end), and the connection stays open.
        for _ in 0..<100 {
            try channel.writeInbound(Self.head)
            try channel.writeInbound(HTTPRequestPart.end(nil))
            loop.advanceTime(by: .milliseconds(10))
        }
        #expect(handler.checksScheduled == 1)
        #expect(channel.isActive)
        // The check fires (at 2 s after the first head) with no request being read: nothing closes.
        loop.advanceTime(by: .seconds(2))
        #expect(channel.isActive)
        // A request whose head arrives 1.5 s after the next check starts is closed at its own
        // due time, not at the check's first firing: open until 2 s after its head, closed at 2 s.
        try channel.writeInbound(Self.head)
        try channel.writeInbound(HTTPRequestPart.end(nil))
        loop.advanceTime(by: .milliseconds(1500))
        try channel.writeInbound(Self.head)
        Self.expectClosed(loop, channel, after: .seconds(2))
    }

    /// Open until 1 ms before `delay` has passed, closed at `delay`.
    static func expectClosed(_ loop: EmbeddedEventLoop, _ channel: EmbeddedChannel, after delay: TimeAmount) {
        loop.advanceTime(by: delay - .milliseconds(1))
        #expect(channel.isActive)
        loop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
        _ = try? channel.finish()
    }

    @Test("a connection's first request still arriving at its deadline closes the connection at that moment")
    func requestDeadlineCloses() throws {
        let (loop, channel) = try Self.connected(RequestDeadlineHandler(deadline: .seconds(1)))
        try channel.writeInbound(Self.head)
        Self.expectClosed(loop, channel, after: .seconds(1))
    }

    /// Counts the handles a factory makes, and what they record.
    final class CountingFactory: MetricsFactory, @unchecked Sendable {
        private let lock = NSLock()
        private var made = 0
        private var increments: [String: Int64] = [:]
        var handlesMade: Int { lock.withLock { made } }
        func total(_ key: String) -> Int64 { lock.withLock { increments[key] ?? 0 } }
        static func key(_ dimensions: [(String, String)]) -> String { dimensions.map { "\($0.0)=\($0.1)" }.joined(separator: ",") }

        final class Counting: CounterHandler, TimerHandler, @unchecked Sendable {
            let factory: CountingFactory
            let key: String
            init(_ factory: CountingFactory, _ key: String) { (self.factory, self.key) = (factory, key) }
            func increment(by amount: Int64) { factory.lock.withLock { factory.increments[key, default: 0] += amount } }
            func reset() {}
            func recordNanoseconds(_ duration: Int64) { increment(by: 1) }
        }
        private func make(_ label: String, _ dimensions: [(String, String)]) -> Counting {
            lock.withLock { made += 1 }
            return Counting(self, label + ":" + Self.key(dimensions))
        }
        func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { make(label, dimensions) }
        func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { fatalError("unused") }
        func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { make(label, dimensions) }
        func destroyCounter(_ handler: any CounterHandler) {}
        func destroyRecorder(_ handler: any RecorderHandler) {}
        func destroyTimer(_ handler: any TimerHandler) {}
    }

    @Test("ceremony metrics: each counter and timer made once, every ceremony counted")
    func metricsHandlesMadeOnce() {
        let factory = CountingFactory()
        let metrics = RouteMetrics(factory: factory)
        let atStart = factory.handlesMade  // the failure counters, made at 0 when the metrics are
        for i in 0..<200 {
            metrics.ceremony("authentication", code: i % 4 == 0 ? "authentication_failed" : "ok", duration: .microseconds(500))
        }
        // Two counters (ok, authentication_failed) and the ceremony's timer: before, 400 handles.
        #expect(factory.handlesMade - atStart <= 4, "\(factory.handlesMade)")
        let ok = "webauthn_ceremonies_total:" + CountingFactory.key([("ceremony", "authentication"), ("outcome", "success"), ("code", "ok")])
        let failed =
            "webauthn_ceremonies_total:"
            + CountingFactory.key([("ceremony", "authentication"), ("outcome", "failure"), ("code", "authentication_failed")])
        let timer = "webauthn_ceremony_duration_seconds:" + CountingFactory.key([("ceremony", "authentication")])
        #expect(factory.total(ok) == 150 && factory.total(failed) == 50 && factory.total(timer) == 200)
    }
}
