// The calibration text of stage 11: a few paragraphs of the kinds of input a
// chat model sees (prose, dialogue, code, arithmetic, lists), so the routing
// statistics that pick the GPU's experts are not those of one domain.
#pragma once

namespace guild {

inline constexpr const char* kCalibrationText =
    "User: Can you explain why the sky is blue, in a few sentences?\n"
    "Assistant: Sunlight contains every colour. As it passes through the air, the short blue wavelengths are "
    "scattered by gas molecules far more than the long red ones, so blue light reaches your eyes from every "
    "direction of the sky. At sunset the light crosses more air, the blue is scattered away, and reds remain.\n"
    "User: Write a Python function that returns the n-th Fibonacci number.\n"
    "Assistant: def fib(n: int) -> int:\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
    "    return a\n\nprint([fib(i) for i in range(10)])  # [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]\n"
    "User: What is 17 * 23 + 144 / 12?\n"
    "Assistant: 17 * 23 = 391 and 144 / 12 = 12, so the answer is 403.\n"
    "In the beginning of the nineteenth century the town had three mills, a school and a small library; "
    "the river that turned the wheels froze most winters, and the miller's ledger records the price of "
    "flour, salt and lamp oil week by week.\n"
    "- Preheat the oven to 200 degrees.\n- Mix the flour, butter and a pinch of salt.\n- Bake for 25 minutes.\n"
    "SELECT name, COUNT(*) FROM orders WHERE created_at > '2024-01-01' GROUP BY name ORDER BY 2 DESC;\n"
    "Der schnelle braune Fuchs springt über den faulen Hund. Le renard brun rapide saute par-dessus le chien.\n";

}  // namespace guild
