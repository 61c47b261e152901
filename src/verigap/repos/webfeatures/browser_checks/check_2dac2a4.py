"""Hidden browser check: a user sets their name on the settings page and sees it in the header."""

from _verigap_browser import browser, log_in, serve, visible_text
from selenium.webdriver.common.by import By


def test_a_user_sets_a_display_name_in_the_browser(app, user_id):
    with serve(app) as base, browser() as driver:
        log_in(driver, base, "tester", "password123")
        driver.get(f"{base}/settings")
        driver.find_element(By.NAME, "first_name").send_keys("Ada")
        last = driver.find_element(By.NAME, "last_name")
        last.send_keys("Lovelace")
        last.submit()
        driver.get(f"{base}/")
        assert "Ada Lovelace" in visible_text(driver)
