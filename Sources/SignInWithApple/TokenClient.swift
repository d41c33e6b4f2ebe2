internal import Foundation
#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif
public import WebAuthnCore
internal import _WebAuthnEncoding

/// What Apple's token endpoint answers. The `idToken` is not verified here:
/// ``AppleSignIn/exchange(code:clientID:redirectURI:expectedSub:)`` verifies it.
public struct AppleTokenResponse: Sendable, Equatable {
    /// `access_token` (Apple's access tokens are currently of no use to a server).
    public let accessToken: String
    /// `token_type`, `bearer`.
    public let tokenType: String
    /// `expires_in`, seconds.
    public let expiresIn: Int
    /// `refresh_token`: keep it (revocation needs it); present for `authorization_code` grants only.
    public let refreshToken: String?
    /// `id_token`, the identity token, unverified.
    public let idToken: String?
}

/// Apple's token and revoke endpoints: code exchange, refresh token validation and
/// revocation, each with a fresh client secret, form-encoded, with a timeout and a
/// 64 KiB cap on the answer. Errors: `apple_request_refused` (Apple's OAuth error
/// string in the message), `apple_endpoint_unavailable`, `configuration_invalid`.
public struct AppleTokenClient: Sendable {
    /// The largest answer accepted, in bytes.
    public static let maxResponseSize = 64 * 1024

    /// The configuration (it must have ``SignInWithAppleConfiguration/credentials``).
    public let configuration: SignInWithAppleConfiguration
    private let credentials: AppleClientCredentials
    private let clock: WebAuthnClock

    /// A client; throws `configuration_invalid` when the configuration has no credentials.
    public init(configuration: SignInWithAppleConfiguration, clock: WebAuthnClock = .system) throws(WebAuthnError) {
        guard let credentials = configuration.credentials else {
            throw WebAuthnError(.configurationInvalid, "Apple's token endpoint needs the team id, key id and private key")
        }
        self.configuration = configuration
        self.credentials = credentials
        self.clock = clock
    }

    /// Exchanges an authorization code (single use, valid 5 minutes) for tokens.
    /// `redirectURI` is sent only when given (the web flow); `clientID` is the client
    /// the code was issued to (the `aud` of its identity token).
    public func exchange(code: String, clientID: String, redirectURI: String? = nil) async throws(WebAuthnError) -> AppleTokenResponse {
        var fields = [("grant_type", "authorization_code"), ("code", code)]
        if let redirectURI { fields.append(("redirect_uri", redirectURI)) }
        return try await tokenRequest(fields, clientID: clientID)
    }

    /// Validates a refresh token (`grant_type=refresh_token`); Apple throttles this, call it at most daily.
    public func validate(refreshToken: String, clientID: String) async throws(WebAuthnError) -> AppleTokenResponse {
        try await tokenRequest([("grant_type", "refresh_token"), ("refresh_token", refreshToken)], clientID: clientID)
    }

    /// The OAuth `error` of Apple's refusal (an `apple_request_refused` this client threw), such as
    /// `invalid_grant` or `invalid_client`; nil for any other error.
    public static func refusal(of error: WebAuthnError) -> Substring? {
        guard error.code == .appleRequestRefused, let range = error.message.range(of: " endpoint answered ") else { return nil }
        return error.message[range.upperBound...].prefix { $0 != ":" && $0 != " " }
    }

    /// Revokes a refresh token (`token_type_hint=refresh_token`), as account deletion requires.
    public func revoke(refreshToken: String, clientID: String) async throws(WebAuthnError) {
        let fields = [("token", refreshToken), ("token_type_hint", "refresh_token")]
        let response = try await post("revoke", fields, clientID: clientID)
        guard response.status == 200 else { throw Self.failure(response, endpoint: "revoke") }
    }

    private func tokenRequest(_ fields: [(String, String)], clientID: String) async throws(WebAuthnError) -> AppleTokenResponse {
        let response = try await post("token", fields, clientID: clientID)
        guard response.status == 200 else { throw Self.failure(response, endpoint: "token") }
        return try Self.tokenResponse(response.body)
    }

    private func post(_ endpoint: String, _ fields: [(String, String)], clientID: String) async throws(WebAuthnError) -> AppleHTTP.Response {
        guard configuration.clientIDs.contains(where: { Bytes.sameUTF8($0, clientID) }) else {
            throw WebAuthnError(.configurationInvalid, "\"\(clientID.prefix(64))\" is not a configured client id")
        }
        let secret = try AppleClientSecret.make(
            credentials: credentials, clientID: clientID, now: clock.now(),
            lifetime: configuration.clientSecretLifetime)
        var request = URLRequest(url: configuration.endpoint(endpoint))
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.httpBody = AppleHTTP.formBody([("client_id", clientID), ("client_secret", secret)] + fields)
        return try await AppleHTTP.send(request, maxBytes: Self.maxResponseSize, timeout: configuration.requestTimeout)
    }

    /// An OAuth error answer (`{"error": "invalid_grant"}`) is `apple_request_refused`; anything else is `apple_endpoint_unavailable`.
    static func failure(_ response: AppleHTTP.Response, endpoint: String) -> WebAuthnError {
        if let json = try? JSONValue.parse(response.body, limits: JSONLimits(maxBytes: maxResponseSize, maxDepth: 4)),
            let error = json["error"]?.stringValue, !error.isEmpty
        {
            let description = json["error_description"]?.stringValue.map { ": \($0.prefix(200))" } ?? ""
            return WebAuthnError(.appleRequestRefused, "Apple's \(endpoint) endpoint answered \(error.prefix(64))\(description) (HTTP \(response.status))")
        }
        return WebAuthnError(.appleEndpointUnavailable, "Apple's \(endpoint) endpoint answered HTTP \(response.status)")
    }

    static func tokenResponse(_ body: [UInt8]) throws(WebAuthnError) -> AppleTokenResponse {
        let json: JSONValue
        do {
            json = try JSONValue.parse(body, limits: JSONLimits(maxBytes: maxResponseSize, maxDepth: 4))
        } catch {
            throw WebAuthnError(.appleEndpointUnavailable, "Apple's token answer is not JSON: \(error.message)")
        }
        guard let access = json["access_token"]?.stringValue, let type = json["token_type"]?.stringValue,
            let expiresIn = json["expires_in"]?.intValue, expiresIn >= 0
        else {
            throw WebAuthnError(.appleEndpointUnavailable, "Apple's token answer lacks access_token, token_type or expires_in")
        }
        let refresh = json["refresh_token"], id = json["id_token"]
        guard refresh == nil || refresh?.stringValue != nil, id == nil || id?.stringValue != nil else {
            throw WebAuthnError(.appleEndpointUnavailable, "Apple's token answer has a refresh_token or id_token that is not a string")
        }
        return AppleTokenResponse(
            accessToken: access, tokenType: type, expiresIn: expiresIn,
            refreshToken: refresh?.stringValue, idToken: id?.stringValue)
    }
}
