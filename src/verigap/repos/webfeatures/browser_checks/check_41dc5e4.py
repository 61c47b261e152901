"""Hidden browser check: a signed-in user switches to dark mode and the page is drawn dark."""

from _verigap_browser import browser, log_in, serve


def _background_luminance(driver) -> float:
    rgb = driver.execute_script(
        "const c = getComputedStyle(document.body).backgroundColor;"
        "return c.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number);"
    )
    return (0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]) / 255


def test_a_user_switches_to_dark_mode_and_sees_a_dark_page(app, user_id):
    with serve(app) as base, browser() as driver:
        log_in(driver, base, "tester", "password123")
        driver.get(f"{base}/")
        assert _background_luminance(driver) > 0.5  # light by default
        driver.get(f"{base}/theme/dark")
        driver.get(f"{base}/")
        assert _background_luminance(driver) < 0.3
