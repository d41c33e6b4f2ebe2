import Foundation
import Testing

extension SecurityTests {
    static let health = "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"

    /// `count` connections to `port`, each answered once.
    static func hold(_ count: Int, port: Int) throws -> [RawConnection] {
        var held: [RawConnection] = []
        for _ in 0..<count {
            let c = try RawConnection(port: port)
            held.append(c)
            try c.send(health)
            #expect(try c.receive().hasPrefix("HTTP/1.1 200"))
        }
        return held
    }

    @Test("connections: at most --max-connections at once from every address; more wait in the listen queue and are answered when one closes")
    func globalConnectionCap() async throws {
        // Before: no cap but the descriptors; four addresses within their own limit took them all,
        // and the accept loop spun on EMFILE while every new client, /healthz included, timed out.
        let server = try await ServeProcess(
            database: ServeProcess.temporaryDatabase(), extra: ["--max-connections", "3", "--max-connections-per-address", "0"])
        defer { server.stop() }
        let health = Self.health
        var held = try Self.hold(3, port: server.port)
        defer { for c in held { c.close() } }
        // The fourth connects (the kernel queues it) but is not accepted: no answer while three are open.
        let waiting = try RawConnection(port: server.port)
        defer { waiting.close() }
        try waiting.send(health)
        #expect(await waiting.receive(within: 1.5) == nil, "a fourth connection was served beside three")
        // The three held still answer.
        for c in held {
            try c.send(health)
            #expect(try c.receive().hasPrefix("HTTP/1.1 200"))
        }
        // One closed: the waiting one is accepted and its request answered.
        held.removeFirst().close()
        let answer = await waiting.receive(within: 10)
        #expect(answer?.hasPrefix("HTTP/1.1 200") == true, "\(answer ?? "no answer")")
        // serve raised its soft descriptor limit to the hard one.
        let limits = try String(contentsOfFile: "/proc/\(server.process.processIdentifier)/limits", encoding: .utf8)
        let files = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }?.split(separator: " ", omittingEmptySubsequences: true)
        #expect(files.map { $0.count >= 5 && $0[3] == $0[4] } == true, "\(files ?? [])")
    }
}
