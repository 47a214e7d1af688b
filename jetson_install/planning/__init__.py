"""Platform + catalog + options -> `Plan`: its route and the exact steps an install runs."""
