import Foundation

/// A grouped bar chart written as a standalone SVG document, so that `make bench` can draw its own figures into
/// docs/ with no plotting package: categories along x (e.g. device counts), one bar per series in each group, a
/// linear y axis from zero with round ticks, the value above each bar, and a legend.
///
/// Bars rather than lines because the categories (1, 10, 100, 500 devices) are not evenly spaced: a line between
/// them would suggest a slope that was never measured.
struct SVGBarChart {
    struct Series {
        let name: String
        /// A CSS colour.
        let color: String
        /// One value per category; `nil` draws no bar (e.g. a peer that was not run).
        let values: [Double?]
    }

    let title: String
    let subtitle: String
    let xLabel: String
    let yLabel: String
    let categories: [String]
    let series: [Series]
    /// How each bar's value is printed above it.
    var valueFormat = "%.0f"
    var width = 760.0
    var height = 440.0

    private let plotLeft = 80.0
    private let plotRightMargin = 24.0
    private let plotTop = 92.0
    private let plotBottomMargin = 64.0

    func render() -> String {
        let plotRight = width - plotRightMargin
        let plotBottom = height - plotBottomMargin
        let plotWidth = plotRight - plotLeft
        let plotHeight = plotBottom - plotTop
        let maximum = series.flatMap { $0.values.compactMap { $0 } }.filter(\.isFinite).max() ?? 1
        let ticks = Self.ticks(upTo: maximum)
        let top = ticks.last ?? 1
        func y(_ value: Double) -> Double { plotBottom - value / top * plotHeight }

        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Self.number(width))" height="\(Self.number(height))" \
            viewBox="0 0 \(Self.number(width)) \(Self.number(height))" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">
            <rect width="100%" height="100%" fill="#ffffff"/>
            <text x="\(Self.number(plotLeft))" y="28" font-size="17" font-weight="bold" fill="#111">\(Self.escape(title))</text>
            <text x="\(Self.number(plotLeft))" y="48" font-size="12" fill="#555">\(Self.escape(subtitle))</text>

            """
        // Grid lines and y tick labels.
        for tick in ticks {
            svg += """
                <line x1="\(Self.number(plotLeft))" y1="\(Self.number(y(tick)))" x2="\(Self.number(plotRight))" \
                y2="\(Self.number(y(tick)))" stroke="\(tick == 0 ? "#333" : "#e3e3e3")" stroke-width="1"/>
                <text x="\(Self.number(plotLeft - 8))" y="\(Self.number(y(tick) + 4))" font-size="12" fill="#333" \
                text-anchor="end">\(Self.escape(Self.tickLabel(tick)))</text>

                """
        }
        svg += """
            <line x1="\(Self.number(plotLeft))" y1="\(Self.number(plotTop))" x2="\(Self.number(plotLeft))" \
            y2="\(Self.number(plotBottom))" stroke="#333" stroke-width="1"/>
            <text transform="translate(22 \(Self.number(plotTop + plotHeight / 2))) rotate(-90)" font-size="13" fill="#333" \
            text-anchor="middle">\(Self.escape(yLabel))</text>
            <text x="\(Self.number(plotLeft + plotWidth / 2))" y="\(Self.number(height - 18))" font-size="13" fill="#333" \
            text-anchor="middle">\(Self.escape(xLabel))</text>

            """
        // Bars: each category gets an equal slot, 70% of it filled by the bars it has (a series with no value there
        // leaves no gap), centred in the slot.
        let slot = plotWidth / Double(max(categories.count, 1))
        for (index, category) in categories.enumerated() {
            let present = series.filter { index < $0.values.count && $0.values[index]?.isFinite == true }
            let barWidth = slot * 0.7 / Double(max(present.count, 1))
            let groupLeft = plotLeft + slot * Double(index) + slot * 0.15
            svg += """
                <text x="\(Self.number(plotLeft + slot * (Double(index) + 0.5)))" y="\(Self.number(plotBottom + 20))" \
                font-size="13" fill="#111" text-anchor="middle">\(Self.escape(category))</text>

                """
            for (position, entry) in present.enumerated() {
                guard let value = entry.values[index] else { continue }
                let x = groupLeft + barWidth * Double(position)
                svg += """
                    <rect x="\(Self.number(x))" y="\(Self.number(y(value)))" width="\(Self.number(barWidth - 2))" \
                    height="\(Self.number(plotBottom - y(value)))" fill="\(entry.color)"><title>\(Self.escape(entry.name)), \
                    \(Self.escape(category)): \(Self.escape(String(format: valueFormat, value)))</title></rect>
                    <text x="\(Self.number(x + (barWidth - 2) / 2))" y="\(Self.number(y(value) - 4))" font-size="11" \
                    fill="#222" text-anchor="middle">\(Self.escape(String(format: valueFormat, value)))</text>

                    """
            }
        }
        // Legend, in one row under the subtitle.
        var legendX = plotLeft
        for entry in series {
            svg += """
                <rect x="\(Self.number(legendX))" y="62" width="12" height="12" fill="\(entry.color)"/>
                <text x="\(Self.number(legendX + 17))" y="72" font-size="12" fill="#111">\(Self.escape(entry.name))</text>

                """
            // An estimate of the text's width at 12 px: no font metrics here.
            legendX += 17 + Double(entry.name.count) * 6.8 + 24
        }
        svg += "</svg>\n"
        return svg
    }

    /// Round tick values from 0 to at least `maximum`: steps of 1, 2 or 5 × 10ⁿ, about five of them.
    static func ticks(upTo maximum: Double) -> [Double] {
        guard maximum > 0, maximum.isFinite else { return [0, 1] }
        let rough = maximum / 5
        let magnitude = pow(10, floor(log10(rough)))
        let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= rough } ?? 10 * magnitude
        var ticks: [Double] = [0]
        while let last = ticks.last, last < maximum { ticks.append(last + step) }
        return ticks
    }

    private static func tickLabel(_ value: Double) -> String {
        value == value.rounded() ? String(format: "%.0f", value) : String(format: "%g", value)
    }

    /// Coordinates with one decimal: enough for a screen, and a stable diff between runs of the same numbers.
    private static func number(_ value: Double) -> String {
        String(format: "%.1f", value)
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
