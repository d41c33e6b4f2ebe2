internal import Foundation
internal import Hummingbird
internal import Logging
internal import WebAuthnCore

/// Throttling: the token buckets a request is counted in, and the budgets of failed results an
/// attempt holds while it runs (``RateLimiter``).
extension WebAuthnRoutes {
    /// Counts the request in its bucket: the session's when it carries a
    /// valid session cookie, else the client address's. A request that `starts`
    /// something pending (options, an Apple nonce or web flow) with a session cookie also
    /// counts in its address's bucket of starts at the per-address rate (one without a cookie
    /// is held to the address's bucket already): minted cookies buy no more than twice the
    /// per-address rate, and one address cannot fill the store's pending ceremonies for everyone.
    func throttle<Context: RequestContext>(_ request: Request, _ context: Context, starts: Bool = false) throws {
        guard let limit = configuration.rateLimit, let limiter else { return }
        let now = self.now
        let address = clientAddress(request, context)
        if let token = sessions.token(request) {
            if limiter.isEmpty("f:" + token.cookieValue, now: now, rate: Self.failureRate) { throw Throttled(seconds: 10, scope: "failures", address: address) }
            if let wait = limiter.take("s:" + token.cookieValue, rate: limit.perSession, now: now) {
                throw Throttled(seconds: wait, scope: "session", address: address)
            }
            // All the sessions of one address together: minting cookies buys no extra budget.
            if let wait = limiter.take("A:" + address, rate: limit.perSession, now: now) { throw Throttled(seconds: wait, scope: "address", address: address) }
            if starts, let wait = limiter.take("c:" + address, rate: limit.perAddress, now: now) {
                throw Throttled(seconds: wait, scope: "address", address: address)
            }
        } else {
            if let wait = limiter.take("a:" + address, rate: limit.perAddress, now: now) { throw Throttled(seconds: wait, scope: "address", address: address) }
        }
    }

    /// Failed results per session: a burst of 5, then one each 10 s, so a
    /// pending ceremony cannot be used as an oracle or a CPU pump.
    static let failureRate = 0.1
    /// See ``failureRate``.
    static let failureBurst = 5.0

    /// Failed results per client address, all its sessions together: a burst of 100, then 5 a
    /// second; only those refused after the credential was looked up count (the others cost
    /// nothing). New cookies cost one options request each, so a budget per session alone let one
    /// address run 1,250 failing results at once through 250 minted cookies (red team,
    /// thirty-second pass re-check). Everyone behind one address shares it: at 20 and 1 a second,
    /// counting every refusal, one junk request a second from a neighbour behind the same NAT kept
    /// a user's correct sign-ins at `429` (second re-check).
    static let addressFailureRate = 5.0, addressFailureBurst = 100.0

    /// What an attempt holds while it runs (``beginAttempt(_:_:_:)``): a token of each failure
    /// bucket it took from.
    struct Attempt {
        struct Hold {
            let key: String, rate: Double, burst: Double
            /// Given back for a failure decided before the credential lookup, which costs nothing.
            let backWhenCheap: Bool
        }
        let holds: [Hold]
    }

    /// Holds one failed result of the session's and one of its address's for an attempt that can
    /// fail (a ceremony's result, an Apple sign-in), while it runs: attempts sent at once cannot all
    /// pass a check made before any of them had failed. Red team, thirty-second pass: 250 failing
    /// results sent at once on one cookie, over separate connections, each ran (a decoy
    /// verification, a credential ID probed), where 5 should have.
    /// ``settleAttempt(_:failure:notTheClients:)`` gives them back unless the client's attempt failed.
    func beginAttempt<Context: RequestContext>(_ token: BrowserSessions.Token?, _ request: Request, _ context: Context) throws -> Attempt {
        guard configuration.rateLimit != nil, let limiter else { return Attempt(holds: []) }
        let address = clientAddress(request, context)
        var holds: [Attempt.Hold] = []
        if let token { holds.append(.init(key: "f:" + token.cookieValue, rate: Self.failureRate, burst: Self.failureBurst, backWhenCheap: false)) }
        // Not in conformance mode: its test tools send hundreds of refused responses from one address.
        if !configuration.conformance {
            holds.append(.init(key: "F:" + address, rate: Self.addressFailureRate, burst: Self.addressFailureBurst, backWhenCheap: true))
        }
        let now = self.now
        for (i, hold) in holds.enumerated() {
            if let wait = limiter.take(hold.key, rate: hold.rate, now: now, burst: hold.burst) {
                for taken in holds[..<i] { limiter.giveBack(taken.key, rate: taken.rate, burst: taken.burst, now: now) }
                throw Throttled(seconds: wait, scope: "failures", address: address)
            }
        }
        return Attempt(holds: holds)
    }

    /// Ends an attempt of ``beginAttempt(_:_:_:)``. A success (`failure` nil), or a failure that is
    /// not the client's (`notTheClients`: the store's, the server's, Apple's), gives every token
    /// back; a failure decided before the credential was looked up
    /// (`WebAuthnError.shownBeforeCredentialLookup`) gives back the address's and keeps the
    /// session's; any other failure keeps both.
    func settleAttempt(
        _ attempt: Attempt, failure: WebAuthnError.Code? = nil, notTheClients: Set<WebAuthnError.Code> = WebAuthnRoutes.serverFailures
    ) {
        guard let limiter else { return }
        let clients = failure.map { !notTheClients.contains($0) } ?? false
        let cheap = failure.map(WebAuthnError.shownBeforeCredentialLookup.contains) ?? false
        for hold in attempt.holds where !clients || (cheap && hold.backWhenCheap) {
            limiter.giveBack(hold.key, rate: hold.rate, burst: hold.burst, now: now)
        }
    }

    /// The `throttled` audit events written per client address: one each ten seconds.
    static let throttledEventRate = 0.1

    struct Throttled: Error {
        let seconds: Int
        let scope: String
        /// The client's address bucket (``ClientAddress/bucket(_:)``).
        let address: String
    }

    /// The `throttled` audit event's fields: the scope, the path, the address (or /64) throttled,
    /// and `hint=x_forwarded_for_untrusted` when the request came with `X-Forwarded-For` from a peer
    /// that is not a trusted proxy: behind a proxy that is not listed, every client counts as the
    /// proxy's one address, and one client's refusals refuse all (operator review, helper 72). A
    /// token, not advice: a client may send the header itself, and must not be trusted for it.
    func throttledEvent<Context: RequestContext>(_ throttled: Throttled, _ request: Request, _ context: Context) -> Logger.Metadata {
        var event: Logger.Metadata = [
            "scope": .string(throttled.scope), "path": .string(LoggedPath.withoutIdentifiers(request.uri.path)), "address": .string(throttled.address),
        ]
        let peer = (context as? any RemoteAddressRequestContext)?.remoteAddress?.ipAddress ?? "unknown"
        if request.headers[.init("X-Forwarded-For")!] != nil, !configuration.trustedProxies.contains(where: { $0.contains(peer) }) {
            event["hint"] = "x_forwarded_for_untrusted"
        }
        return event
    }
}
