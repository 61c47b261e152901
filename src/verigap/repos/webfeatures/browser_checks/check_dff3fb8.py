"""Hidden browser check: the app reads in English by default, and a user can switch to Thai."""

from _verigap_browser import browser, log_in, serve, visible_text


def test_a_user_reads_english_then_switches_to_thai(app, user_id):
    with serve(app) as base, browser() as driver:
        driver.get(f"{base}/login")
        assert "Sign in" in visible_text(driver)
        log_in(driver, base, "tester", "password123")
        driver.get(f"{base}/lang/th")
        driver.get(f"{base}/")
        assert "ยังไม่มีงาน" in visible_text(driver)
