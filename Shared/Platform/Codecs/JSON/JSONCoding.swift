import FoundationEssentials

/// The one JSON encoder configuration of the project: keys sorted (stable bytes for tests, logs and signatures) and
/// `/` left unescaped. Responses, log lines, metrics, JWTs, FCM messages and the runner's events all use it.
public enum JSONCoding {
    /// A new encoder with the project's settings (an encoder is not `Sendable`, so each use makes its own).
    public static func encoder(prettyPrinted: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting =
            prettyPrinted
            ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// `value` as JSON bytes, or `nil` when it cannot be encoded. A ``JSONSerializable`` value is written directly,
    /// the same bytes without the encoder.
    public static func encode(_ value: some Encodable) -> [UInt8]? {
        if let value = value as? any JSONSerializable { return value.jsonValue.serialized }
        return (try? encoder().encode(value)).map(Array.init)
    }

    /// `value` as JSON text, or `fallback` when it cannot be encoded.
    public static func string(_ value: some Encodable, fallback: String = "{}") -> String {
        encode(value).map { String(decoding: $0, as: UTF8.self) } ?? fallback
    }
}
